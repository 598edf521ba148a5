"""STOMP and AMQP on one broker, both ways, per the contract's table ("Messages across
protocols"): headers <-> properties, text vs bytes, a map body delivered to STOMP as its AMQP
encoding, durable subscriptions shared by name; and STOMP transactions (BEGIN/COMMIT/ABORT)."""
from __future__ import annotations

import uuid

import pytest
from proton import Data, Message, symbol
from proton.reactor import DurableSubscription, LinkOption
from proton.utils import BlockingConnection
from stomp_clients import Raw

TIMEOUT = 10


class Topic(LinkOption):
    def apply(self, link) -> None:
        link.source.capabilities.put_object(symbol("topic"))


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


def session(broker, extra=()) -> Raw:
    raw = Raw(broker)
    assert raw.connect("1.2", extra=extra).command == "CONNECTED"
    return raw


def amqp(broker, container_id: str | None = None) -> BlockingConnection:
    return BlockingConnection(broker.url, timeout=TIMEOUT, container_id=container_id or str(uuid.uuid4()))


def stomp_send(raw: Raw, destination: str, body: bytes, headers=(), length: bool = True) -> None:
    raw.frame("SEND", [("destination", destination), ("receipt", "r"), *headers], body, length=length)
    assert raw.until("RECEIPT").header("receipt-id") == "r"


def subscribe(raw: Raw, destination: str, sid: str = "s", headers=()) -> None:
    raw.frame("SUBSCRIBE", [("destination", destination), ("id", sid), ("receipt", "sub"), *headers])
    assert raw.until("RECEIPT").header("receipt-id") == "sub"


def test_stomp_text_to_amqp(broker):
    conn = amqp(broker)
    receiver = conn.create_receiver("x.text")
    raw = session(broker)
    stomp_send(raw, "/queue/x.text", "héllo".encode(), [
        ("content-type", "text/plain"), ("correlation-id", "c-9"), ("reply-to", "/topic/answers"), ("type", "order"),
        ("persistent", "true"), ("priority", "6"), ("JMSXGroupID", "g"), ("expires", "4102444800000"),
        ("colour", "red")])
    m = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert m.body == "héllo"
    assert (m.correlation_id, m.reply_to, m.subject, m.group_id) == ("c-9", "answers", "order", "g")
    assert (m.durable, m.priority, m.content_type) == (True, 6, "text/plain")
    assert m.expiry_time == 4102444800.0
    assert m.properties == {"colour": "red"}
    assert m.annotations[symbol("x-opt-jms-msg-type")] == 5
    assert m.annotations[symbol("x-opt-jms-reply-to")] == 1
    assert m.id and str(m.id).startswith("ID:")
    conn.close()


def test_stomp_bytes_to_amqp(broker):
    conn = amqp(broker)
    receiver = conn.create_receiver("x.bytes")
    raw = session(broker)
    stomp_send(raw, "/queue/x.bytes", b"\x00\x01\x02", [("content-type", "application/octet-stream")])
    stomp_send(raw, "/queue/x.bytes", b"text?", [("amq-msg-type", "bytes")])
    stomp_send(raw, "/queue/x.bytes", b"no length is text", length=False)
    first, second, third = (receiver.receive(timeout=TIMEOUT) for _ in range(3))
    receiver.accept()
    assert bytes(first.body) == b"\x00\x01\x02" and first.annotations[symbol("x-opt-jms-msg-type")] == 3
    assert bytes(second.body) == b"text?"
    assert third.body == "no length is text"
    conn.close()


def test_amqp_to_stomp(broker):
    raw = session(broker)
    subscribe(raw, "/queue/y.text")
    conn = amqp(broker)
    sender = conn.create_sender("y.text")
    sender.send(Message(body="from amqp", id="mid-1", correlation_id="c-1", reply_to="replies", subject="kind",
                        durable=True, priority=8, content_type="text/plain", group_id="grp",
                        properties={"n": 5, "flag": True, "s": "v"},
                        annotations={symbol("x-opt-jms-reply-to"): 0}))
    sender.send(Message(body=b"\x00raw\x00"))
    text = raw.until("MESSAGE")
    assert text.body == b"from amqp" and text.header("content-length") == "9"
    assert (text.header("message-id"), text.header("correlation-id"), text.header("reply-to")) == (
        "mid-1", "c-1", "/queue/replies")
    assert (text.header("type"), text.header("persistent"), text.header("priority")) == ("kind", "true", "8")
    assert (text.header("n"), text.header("flag"), text.header("s"), text.header("JMSXGroupID")) == (
        "5", "true", "v", "grp")
    binary = raw.until("MESSAGE")
    assert binary.body == b"\x00raw\x00" and binary.header("content-length") == "5"
    conn.close()


def test_amqp_map_reaches_stomp_as_its_amqp_encoding(broker):
    raw = session(broker)
    subscribe(raw, "/queue/y.map")
    conn = amqp(broker)
    conn.create_sender("y.map").send(Message(body={"a": 1, "b": "two"}))
    m = raw.until("MESSAGE")
    assert m.header("content-type") == "application/x-amqp-value"
    data = Data()
    data.decode(m.body)
    assert data.get_object() == {"a": 1, "b": "two"}
    conn.close()


def test_stomp_to_stomp_keeps_headers_and_body(broker):
    raw = session(broker)
    subscribe(raw, "/queue/same")
    stomp_send(raw, "/queue/same", b"\x00bin", [("content-type", "application/x-thing"), ("k", "v"),
                                                  ("k", "second is ignored")])
    m = raw.until("MESSAGE")
    assert (m.body, m.header("content-type"), m.header("k")) == (b"\x00bin", "application/x-thing", "v")


def test_durable_subscription_made_over_stomp_resumes_over_amqp(broker):
    raw = session(broker, extra=[("client-id", "shared1")])
    subscribe(raw, "/topic/dsub", "d", [("activemq.subscriptionName", "name1")])
    raw.frame("DISCONNECT", [("receipt", "bye")])
    raw.until("RECEIPT")
    producer = session(broker)
    stomp_send(producer, "/topic/dsub", b"kept")
    conn = amqp(broker, "shared1")
    receiver = conn.create_receiver("dsub", name="name1", options=[Topic(), DurableSubscription()])
    m = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert bytes(m.body) == b"kept"  # a content-length without a text content-type: bytes
    conn.close()


def test_durable_subscription_made_over_amqp_resumes_over_stomp(broker):
    conn = amqp(broker, "shared2")
    receiver = conn.create_receiver("dsub2", name="name2", options=[Topic(), DurableSubscription()])
    receiver.detach()
    conn.close()
    producer = session(broker)
    stomp_send(producer, "/topic/dsub2", b"for the subscription")
    raw = session(broker, extra=[("client-id", "shared2")])
    subscribe(raw, "/topic/dsub2", "d", [("durable-subscription-name", "name2")])
    assert raw.until("MESSAGE").body == b"for the subscription"


# -- transactions ----------------------------------------------------------------------------------------
def test_sends_in_a_transaction_appear_at_commit_and_vanish_at_abort(broker):
    producer, consumer = session(broker), session(broker)
    subscribe(consumer, "/queue/tx.q")
    producer.frame("BEGIN", [("transaction", "t1")])
    producer.frame("SEND", [("destination", "/queue/tx.q"), ("transaction", "t1")], b"one")
    producer.frame("SEND", [("destination", "/queue/tx.q"), ("transaction", "t1"), ("receipt", "s")], b"two")
    assert producer.until("RECEIPT").header("receipt-id") == "s"
    with pytest.raises(AssertionError):
        consumer.next(timeout=0.5)
    producer.frame("COMMIT", [("transaction", "t1"), ("receipt", "c")])
    assert producer.until("RECEIPT").header("receipt-id") == "c"
    assert [consumer.until("MESSAGE").body for _ in range(2)] == [b"one", b"two"]
    producer.frame("BEGIN", [("transaction", "t2")])
    producer.frame("SEND", [("destination", "/queue/tx.q"), ("transaction", "t2")], b"dropped")
    producer.frame("ABORT", [("transaction", "t2"), ("receipt", "a")])
    assert producer.until("RECEIPT").header("receipt-id") == "a"
    stomp_send(producer, "/queue/tx.q", b"after")
    assert consumer.until("MESSAGE").body == b"after"


def test_acks_in_an_aborted_transaction_give_the_message_back(broker):
    producer = session(broker)
    stomp_send(producer, "/queue/tx.ack", b"m")
    raw = session(broker)
    subscribe(raw, "/queue/tx.ack", headers=[("ack", "client-individual")])
    m = raw.until("MESSAGE")
    raw.frame("BEGIN", [("transaction", "t")])
    raw.frame("ACK", [("id", m.header("ack")), ("transaction", "t")])
    raw.frame("ABORT", [("transaction", "t")])
    again = raw.until("MESSAGE")
    assert again.body == b"m" and again.header("redelivered") == "true"
    raw.frame("BEGIN", [("transaction", "t3")])
    raw.frame("ACK", [("id", again.header("ack")), ("transaction", "t3")])
    raw.frame("COMMIT", [("transaction", "t3"), ("receipt", "done")])
    assert raw.until("RECEIPT").header("receipt-id") == "done"
    raw.frame("DISCONNECT", [("receipt", "bye")])
    raw.until("RECEIPT")
    check = session(broker)
    subscribe(check, "/queue/tx.ack")
    with pytest.raises(AssertionError):
        check.next(timeout=0.5)


def test_unknown_transaction_is_an_error(broker):
    raw = session(broker)
    raw.frame("SEND", [("destination", "/queue/tx.none"), ("transaction", "nope")], b"x")
    assert raw.until("ERROR").header("message").startswith("unknown transaction")
