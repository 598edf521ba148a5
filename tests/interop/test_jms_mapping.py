"""The JMS-over-AMQP mapping as qpid-jms expects it, spoken by a Python client that behaves as
qpid-jms does on the wire (raw annotations; no Java on these machines, see interop/README.md):

- JMS message types travel in `x-opt-jms-msg-type` (0 Message, 1 Object, 2 Map, 3 Bytes,
  4 Stream, 5 Text) and arrive as sent, with their bodies;
- temporary destinations are dynamic sender targets with the capability `temporary-queue` or
  `temporary-topic`; replies reach them through the anonymous relay, by `reply-to`;
- a JMS consumer (open property `product` = `QpidJMS`) gets `x-opt-jms-dest` and, when the
  message has a reply-to, `x-opt-jms-reply-to` (0 queue, 1 topic, 2 temporary queue,
  3 temporary topic) on messages whose sender did not set them; what a sender set is kept.
"""
from __future__ import annotations

from proton import Data, Message, byte, symbol

from wire_helpers import Caps, connect, nothing_more, receive_bodies
from proton.reactor import LinkOption

QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC = 0, 1, 2, 3
MESSAGE, OBJECT, MAP, BYTES, STREAM, TEXT = range(6)
JMS_OPEN = dict(properties={symbol("product"): "QpidJMS", symbol("version"): "2.5.0"},
                desired_capabilities=[symbol("ANONYMOUS-RELAY"), symbol("DELAYED_DELIVERY"),
                                      symbol("SHARED-SUBS"), symbol("sole-connection-for-container")])


def jms_connect(url: str, client_id: str | None = None):
    return connect(url, container_id=client_id, **JMS_OPEN)


class TemporaryTarget(LinkOption):
    """qpid-jms's createTemporaryQueue/Topic: a dynamic target, deleted with its link."""

    def __init__(self, capability: str):
        self.capability = capability

    def apply(self, link) -> None:
        link.target.dynamic = True
        link.target.address = None
        link.target.expiry_policy = link.target.EXPIRE_WITH_LINK
        link.target.capabilities.put_array(False, Data.SYMBOL)
        link.target.capabilities.enter()
        link.target.capabilities.put_symbol(symbol(self.capability))
        link.target.capabilities.exit()


def jms_message(body, msg_type: int, dest_type: int | None = None, **fields) -> Message:
    annotations = {symbol("x-opt-jms-msg-type"): byte(msg_type)}
    if dest_type is not None:
        annotations[symbol("x-opt-jms-dest")] = byte(dest_type)
    return Message(body=body, annotations=annotations, **fields)


def test_every_jms_message_type_arrives_with_its_annotation_and_body(broker):
    conn = jms_connect(broker.url)
    sent = [(MESSAGE, None), (OBJECT, b"\xac\xed\x00\x05serialized"), (MAP, {"a": 1, "b": "two"}),
            (BYTES, b"\x00\x01\x02"), (STREAM, [1, "two", 3.0]), (TEXT, "text body")]
    sender = conn.create_sender("jms.types")
    for msg_type, body in sent:
        sender.send(jms_message(body, msg_type, QUEUE, address="jms.types"))
    receiver = conn.create_receiver("jms.types")
    got = [receiver.receive(timeout=10) for _ in sent]
    receiver.accept()
    assert [(m.annotations["x-opt-jms-msg-type"], m.body) for m in got] == sent
    assert all(type(m.annotations["x-opt-jms-msg-type"]) is byte for m in got)  # a byte stays a byte
    conn.close()


def test_request_reply_through_a_temporary_queue(broker):
    requester = jms_connect(broker.url, "requester")
    temp = requester.create_sender(None, options=[TemporaryTarget("temporary-queue")])
    reply_to = temp.link.remote_target.address
    assert reply_to, "the broker names the temporary queue"
    replies = requester.create_receiver(reply_to, options=[Caps("temporary-queue")])
    requester.create_sender("jms.service").send(_request("ping", reply_to))

    service = jms_connect(broker.url, "service")
    request = service.create_receiver("jms.service").receive(timeout=10)
    assert request.reply_to == reply_to
    assert request.annotations["x-opt-jms-reply-to"] == TEMP_QUEUE  # as the requester set it
    relay = service.create_sender(None)  # anonymous relay, as qpid-jms replies
    relay.send(jms_message("pong", TEXT, TEMP_QUEUE, address=request.reply_to))

    reply = replies.receive(timeout=10)
    replies.accept()
    assert reply.body == "pong"
    assert reply.annotations["x-opt-jms-dest"] == TEMP_QUEUE
    service.close()
    requester.close()


def _request(body: str, reply_to: str) -> Message:
    m = jms_message(body, TEXT, QUEUE, address="jms.service", reply_to=reply_to)
    m.annotations[symbol("x-opt-jms-reply-to")] = byte(TEMP_QUEUE)
    return m


def test_a_temporary_topic_reaches_every_subscriber_and_goes_with_its_link(broker):
    owner = jms_connect(broker.url, "owner")
    temp = owner.create_sender(None, options=[TemporaryTarget("temporary-topic")])
    address = temp.link.remote_target.address
    first = owner.create_receiver(address, name="first", options=[Caps("temporary-topic")])
    second = owner.create_receiver(address, name="second", options=[Caps("temporary-topic")])
    other = jms_connect(broker.url, "other")
    other.create_sender(None).send(jms_message("news", TEXT, TEMP_TOPIC, address=address))
    assert receive_bodies(first, 1) == ["news"]
    assert receive_bodies(second, 1) == ["news"]
    first.close()
    second.close()
    temp.close()  # TemporaryTopic.delete()
    from hermod.broker.tools.clients import management_call
    assert address not in [a["address"] for a in management_call(broker.url, "address.stat")]
    other.close()
    owner.close()


def test_a_jms_consumer_is_told_the_destination_types_a_plain_sender_left_out(broker):
    plain = connect(broker.url)  # not a JMS client: sends no x-opt-jms-* annotations
    plain.create_sender("topic://jms.replies.topic").close()  # the reply destination: a topic
    plain.create_receiver("jms.replies.topic", name="keep", options=[Caps("topic")])
    sender = plain.create_sender("jms.plain")
    sender.send(Message(body="no annotations", reply_to="jms.replies.topic"))
    sender.send(Message(body="no reply-to"))

    jms = jms_connect(broker.url)
    receiver = jms.create_receiver("jms.plain")
    with_reply, without = receiver.receive(timeout=10), receiver.receive(timeout=10)
    receiver.accept()
    assert (with_reply.body, without.body) == ("no annotations", "no reply-to")
    assert with_reply.annotations == {"x-opt-jms-dest": QUEUE, "x-opt-jms-reply-to": TOPIC}
    assert type(with_reply.annotations["x-opt-jms-dest"]) is byte
    assert without.annotations == {"x-opt-jms-dest": QUEUE}

    plain_reader = plain.create_receiver("jms.plain")
    sender.send(Message(body="for a plain reader"))
    m = plain_reader.receive(timeout=10)
    plain_reader.accept()
    assert m.annotations is None  # only JMS consumers get the mapping's annotations
    assert nothing_more(plain_reader)
    jms.close()
    plain.close()


def test_a_topic_message_from_a_plain_sender_is_marked_as_from_a_topic(broker):
    jms = jms_connect(broker.url, "sub-owner")
    sub = jms.create_receiver("jms.news", name="news", options=[Caps("topic")])
    plain = connect(broker.url)
    plain.create_sender("jms.news", options=[Caps("topic", on="target")]).send(Message(body="headline"))
    m = sub.receive(timeout=10)
    sub.accept()
    assert (m.body, m.annotations) == ("headline", {"x-opt-jms-dest": TOPIC})
    plain.close()
    jms.close()


def test_what_a_jms_sender_set_is_kept(broker):
    conn = jms_connect(broker.url)
    # A JMS sender that says topic about a queue address is passed on as it said.
    conn.create_sender("jms.kept").send(jms_message("as sent", TEXT, TOPIC, address="jms.kept"))
    r = conn.create_receiver("jms.kept")
    m = r.receive(timeout=10)
    r.accept()
    assert m.annotations == {"x-opt-jms-msg-type": TEXT, "x-opt-jms-dest": TOPIC}
    conn.close()
