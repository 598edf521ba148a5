"""The ActiveMQ Classic JMS client (Debian's libactivemq-java 5.17.2) against Hermod over
OpenWire: sends (sync, async, producer window), queues, topics, composites, FQQN, wildcards,
virtual topics, prefetch and MessagePull, every ack mode, redelivery, selectors, browsers,
exclusive consumers and priority (contract, "Other protocols")."""
from __future__ import annotations

import pytest
from owclient import JmsError, OwClient
from wire_helpers import connect


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


@pytest.fixture
def client(broker):
    made: list[OwClient] = []

    def make(options: str = "", target=None, connect_now: bool = True, **login) -> OwClient:
        c = OwClient(port_of(target or broker), options)
        made.append(c)
        if connect_now:
            c.connect(**login)
        return c

    yield make
    for c in made:
        c.close()


def port_of(b) -> int:
    return int(b.address.rsplit(":", 1)[1])


def receive_all(c: OwClient, consumer: str, n: int, timeout_ms: int = 5000) -> list[dict]:
    out = []
    for _ in range(n):
        m = c.receive(consumer, timeout_ms)
        assert m is not None, f"only {len(out)} of {n} messages came"
        out.append(m)
    return out


def amqp_take(broker, address: str):
    """One message taken (accepted) by an AMQP client (python-qpid-proton)."""
    conn = connect(broker.url)
    try:
        r = conn.create_receiver(address)
        m = r.receive(timeout=10)
        r.accept()
        return m
    finally:
        conn.close()


def test_queue_send_and_receive_persistent(client):
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.q1", "persistent")
    c("send", "p", "text", "hello")
    c("consumer", "c", "s", "queue:ow.q1")
    m = c.receive("c")
    assert (m["kind"], m["body"], m["mode"], m["redelivered"], m["count"]) == ("text", "hello", "2", "false", "1")
    assert m["dest"] == "queue:ow.q1"
    assert c.receive("c", 200) is None


def test_every_body_and_header_and_property_type_survives_openwire_to_openwire(client):
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.types", "persistent")
    props = ["prop.b=boolean:true", "prop.y=byte:-5", "prop.h=short:300", "prop.i=int:70000",
             "prop.l=long:9000000000", "prop.f=float:1.5", "prop.d=double:2.25", "prop.s=string:caf%C3%A9"]
    ids = [c("send", "p", "text", "t", "corr=c-1", "type=kind", "prio=7", "ttl=600000", "group=g1",
             "replyto=queue:ow.replies", *props)]
    ids.append(c("send", "p", "bytes", "00ff10"))
    ids.append(c("send", "p", "map", "a%3Dint%3A1%3Bb%3Dstring%3Ax%3Bc%3Dshort%3A2%3Bd%3Dfloat%3A0.5"))
    ids.append(c("send", "p", "stream", "int%3A1%3Blong%3A2%3Bstring%3Az%3Bbyte%3A3%3Bchar%3Aq"))
    ids.append(c("send", "p", "object", "serialized"))
    ids.append(c("send", "p", "message", "-"))
    c("consumer", "c", "s", "queue:ow.types")
    text, data, mapped, stream, obj, plain = receive_all(c, "c", 6)
    assert text["body"] == "t" and text["id"] == ids[0].replace("%3A", ":")
    assert (text["corr"], text["type"], text["prio"], text["group"]) == ("c-1", "kind", "7", "g1")
    assert text["replyto"] == "queue:ow.replies"
    assert int(text["exp"]) > int(text["ts"]) > 0
    assert {k: v for k, v in text.items() if k.startswith("prop.")} == {
        "prop.b": "boolean:true", "prop.y": "byte:-5", "prop.h": "short:300", "prop.i": "int:70000",
        "prop.l": "long:9000000000", "prop.f": "float:1.5", "prop.d": "double:2.25", "prop.s": "string:caf\u00e9"}
    assert (data["kind"], data["body"]) == ("bytes", "00ff10")
    assert (mapped["kind"], mapped["body"]) == ("map", "a=int:1;b=string:x;c=short:2;d=float:0.5;")
    assert (stream["kind"], stream["body"]) == ("stream", "int:1;long:2;string:z;byte:3;char:q;")
    assert (obj["kind"], obj["body"]) == ("object", "serialized")
    assert plain["kind"] == "message"


def test_topic_reaches_every_subscriber_and_nonpersistent_async_sends_arrive(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "a", "s", "topic:ow.news")
    c("consumer", "b", "s", "topic:ow.news")
    c("producer", "p", "s", "topic:ow.news", "nonpersistent")
    for i in range(20):
        c("send", "p", "text", f"n{i}")
    for consumer in ("a", "b"):
        assert [m["body"] for m in receive_all(c, consumer, 20)] == [f"n{i}" for i in range(20)]


def test_producer_window_is_answered_with_producer_acks(client):
    """A window of 2 KiB: the client blocks once 2 KiB are unacknowledged, so 50 sends finish
    only if the broker answers each with a ProducerAck."""
    c = client("jms.producerWindowSize=2048")
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.window", "nonpersistent")
    for i in range(50):
        c("send", "p", "text", f"w{i}", timeout=10)
    c("consumer", "c", "s", "queue:ow.window")
    assert [m["body"] for m in receive_all(c, "c", 50)] == [f"w{i}" for i in range(50)]


def test_composite_destination_sends_one_copy_to_each_part(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "t", "s", "topic:ow.comp.c")
    c("producer", "p", "s", "queue:ow.comp.a%2Cow.comp.b%2Ctopic%3A%2F%2Fow.comp.c", "persistent")
    c("send", "p", "text", "x")
    c("consumer", "a", "s", "queue:ow.comp.a")
    c("consumer", "b", "s", "queue:ow.comp.b")
    got = [c.receive(name)["body"] for name in ("a", "b", "t")]
    assert got == ["x", "x", "x"]
    assert c.receive("a", 200) is None


def test_wildcard_topic_subscription_and_fqqn_and_virtual_topic(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "w", "s", "topic:ow.wild.%3E")
    c("consumer", "vt", "s", "queue:Consumer.A.VirtualTopic.OwOrders")
    c("producer", "p", "s", "topic:ow.wild.eu.sport", "persistent")
    c("send", "p", "text", "goal")
    assert c.receive("w")["body"] == "goal"
    c("producer", "v", "s", "topic:VirtualTopic.OwOrders", "persistent")
    c("send", "v", "text", "order-1")
    assert c.receive("vt")["body"] == "order-1"
    c("consumer", "f", "s", "queue:VirtualTopic.OwOrders%3A%3AConsumer.A.VirtualTopic.OwOrders")
    c("send", "v", "text", "order-2")
    got = [m for m in (c.receive("vt", 1000), c.receive("f", 1000)) if m is not None]
    assert [m["body"] for m in got] == ["order-2"]


def test_prefetch_zero_pulls_one_message_at_a_time(client):
    c = client("jms.prefetchPolicy.all=0")
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.pull", "persistent")
    c("consumer", "a", "s", "queue:ow.pull")
    c("consumer", "b", "s", "queue:ow.pull")
    for i in range(4):
        c("send", "p", "text", f"m{i}")
    # With prefetch 0 nothing is pushed ahead: each receive pulls exactly one, whichever consumer.
    assert [c.receive(x)["body"] for x in ("a", "b", "a", "b")] == ["m0", "m1", "m2", "m3"]
    assert c.receive("a", -1) is None
    assert c.receive("b", 300) is None


def test_client_ack_unacknowledged_come_back_after_a_clean_close(client):
    c = client()
    c("session", "s", "false", "client")
    c("producer", "p", "s", "queue:ow.clientack", "persistent")
    for i in range(3):
        c("send", "p", "text", f"c{i}")
    c("consumer", "c", "s", "queue:ow.clientack")
    receive_all(c, "c", 2)
    c("ack", "c")  # acknowledges c0 and c1
    assert c.receive("c")["body"] == "c2"
    c("close")
    d = client()
    d("session", "s", "false", "auto")
    d("consumer", "c", "s", "queue:ow.clientack")
    m = d.receive("c")
    # Given back by a clean close after the application had it: redelivered, no attempt counted.
    assert (m["body"], m["redelivered"], m["count"]) == ("c2", "true", "2")
    assert d.receive("c", 300) is None


def test_individual_ack_takes_only_that_message(client):
    c = client()
    c("session", "s", "false", "individual")
    c("producer", "p", "s", "queue:ow.indiv", "persistent")
    for i in range(3):
        c("send", "p", "text", f"i{i}")
    c("consumer", "c", "s", "queue:ow.indiv")
    receive_all(c, "c", 2)
    c("ack", "c")  # only i1
    c("closeconsumer", "c")
    c("consumer", "d", "s", "queue:ow.indiv")
    assert sorted(m["body"] for m in receive_all(c, "d", 2)) == ["i0", "i2"]


def test_a_client_that_dies_mid_delivery_gets_its_messages_redelivered_and_marked(broker, client):
    c = client()
    c("session", "s", "false", "client")
    c("producer", "p", "s", "queue:ow.dies", "persistent")
    c("send", "p", "text", "d0")
    c("consumer", "c", "s", "queue:ow.dies")
    assert c.receive("c")["body"] == "d0"
    c.kill()
    d = client()
    d("session", "s", "false", "auto")
    d("consumer", "c", "s", "queue:ow.dies")
    m = d.receive("c", 10000)
    assert (m["body"], m["redelivered"], m["count"]) == ("d0", "true", "2")


def test_selector_and_invalid_selector(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "c", "s", "queue:ow.sel", "selector=color%20%3D%20%27red%27")
    c("producer", "p", "s", "queue:ow.sel", "persistent")
    c("send", "p", "text", "blue", "prop.color=string:blue")
    c("send", "p", "text", "red", "prop.color=string:red")
    assert c.receive("c")["body"] == "red"
    with pytest.raises(JmsError) as e:
        c("consumer", "bad", "s", "queue:ow.sel", "selector=color%20%3D%3D%3D")
    assert e.value.java_class == "javax.jms.InvalidSelectorException"
    long_selector = "a%3D1" + "%20OR%20a%3D1" * 3000  # 17 KB: over the contract's 16 KiB
    with pytest.raises(JmsError) as e:
        c("consumer", "long", "s", "queue:ow.sel", f"selector={long_selector}")
    assert e.value.java_class == "javax.jms.InvalidSelectorException" and "16384" in e.value.message


def test_browser_sees_without_taking(client):
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.browse", "persistent")
    for i in range(3):
        c("send", "p", "text", f"b{i}")
    assert c("browse", "s", "queue:ow.browse") == "3 b0 b1 b2"
    c("consumer", "c", "s", "queue:ow.browse")
    assert [m["body"] for m in receive_all(c, "c", 3)] == ["b0", "b1", "b2"]
    assert c("browse", "s", "queue:ow.browse") == "0"


def test_exclusive_consumer_takes_everything_and_priority_wins(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "plain", "s", "queue:ow.excl")
    c("consumer", "excl", "s", "queue:ow.excl%3Fconsumer.exclusive%3Dtrue")
    c("producer", "p", "s", "queue:ow.excl", "persistent")
    for i in range(4):
        c("send", "p", "text", f"e{i}")
    assert [m["body"] for m in receive_all(c, "excl", 4)] == ["e0", "e1", "e2", "e3"]
    assert c.receive("plain", 200) is None
    c("consumer", "low", "s", "queue:ow.prio%3Fconsumer.priority%3D1")
    c("consumer", "high", "s", "queue:ow.prio%3Fconsumer.priority%3D9")
    c("producer", "q", "s", "queue:ow.prio", "persistent")
    for i in range(3):
        c("send", "q", "text", f"p{i}")
    assert [m["body"] for m in receive_all(c, "high", 3)] == ["p0", "p1", "p2"]
    assert c.receive("low", 200) is None


def test_poison_ack_dead_letters_with_the_cause(client):
    """A transacted consumer rolled back past the client's redelivery policy (maximumRedeliveries
    1 here): the client sends a POISON ack and the message goes to the dead-letter address at once,
    with `dlqDeliveryFailureCause`."""
    c = client("jms.redeliveryPolicy.maximumRedeliveries=1&jms.redeliveryPolicy.initialRedeliveryDelay=0")
    c("session", "s", "true", "auto")
    c("session", "a", "false", "auto")
    c("producer", "p", "a", "queue:ow.poison", "persistent")
    c("send", "p", "text", "bad")
    c("consumer", "c", "s", "queue:ow.poison")
    assert c.receive("c")["body"] == "bad"
    c("rollback", "s")
    m = c.receive("c")
    assert (m["body"], m["redelivered"]) == ("bad", "true")
    c("rollback", "s")
    assert c.receive("c", 500) is None
    c("consumer", "dlq", "a", "queue:DLQ")
    dead = c.receive("dlq")
    assert dead["body"] == "bad"
    assert dead["prop.dlqDeliveryFailureCause"].startswith("string:")


def test_amqp_consumer_reads_openwire_message_in_the_jms_mapping(broker, client):
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.toamqp", "persistent")
    mid = c("send", "p", "text", "hi", "corr=k", "type=t", "prio=6", "prop.i=int:5", "prop.s=short:2",
            "replyto=topic:ow.back", "group=g")
    m = amqp_take(broker, "ow.toamqp")
    assert m.body == "hi"
    assert m.id == mid.replace("%3A", ":")
    assert (m.correlation_id, m.subject, m.priority, m.durable, m.group_id) == ("k", "t", 6, True, "g")
    assert m.reply_to == "ow.back"
    assert m.properties == {"i": 5, "s": 2}
    assert type(m.properties["s"]).__name__ == "short"
    assert dict(m.annotations) == {"x-opt-jms-msg-type": 5, "x-opt-jms-dest": 0, "x-opt-jms-reply-to": 1}


def test_prefetched_messages_the_application_never_saw_come_back_unmarked_after_a_clean_close(client):
    c = client()
    c("session", "s", "false", "client")
    c("producer", "p", "s", "queue:ow.unseen", "persistent")
    for i in range(3):
        c("send", "p", "text", f"u{i}")
    c("consumer", "c", "s", "queue:ow.unseen")
    assert c.receive("c")["body"] == "u0"  # u1 and u2 are prefetched, never handed out
    c("closeconsumer", "c")
    c("consumer", "d", "s", "queue:ow.unseen")
    got = receive_all(c, "d", 3)
    assert [(m["body"], m["redelivered"]) for m in got] == [("u0", "true"), ("u1", "false"), ("u2", "false")]


def test_message_groups_stick_to_one_consumer(client):
    c = client("jms.prefetchPolicy.all=1")
    c("session", "s", "false", "auto")
    c("consumer", "a", "s", "queue:ow.groups")
    c("consumer", "b", "s", "queue:ow.groups")
    c("producer", "p", "s", "queue:ow.groups", "persistent")
    for i in range(6):
        c("send", "p", "text", f"g{i}", f"group={'red' if i % 2 else 'blue'}")
    seen: dict[str, set] = {"a": set(), "b": set()}
    bodies = []
    for _ in range(6):
        for name in ("a", "b"):
            m = c.receive(name, 200)
            if m is not None:
                seen[name].add(m["group"])
                bodies.append(m["body"])
    assert sorted(bodies) == [f"g{i}" for i in range(6)]
    assert not (seen["a"] & seen["b"]), seen


def test_scheduled_delivery_waits_for_amq_scheduled_delay(client):
    import time
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.sched", "persistent")
    c("consumer", "c", "s", "queue:ow.sched")
    sent = time.monotonic()
    c("send", "p", "text", "later", "prop.AMQ_SCHEDULED_DELAY=long:1500")
    assert c.receive("c", 500) is None
    m = c.receive("c", 10000)
    assert m["body"] == "later" and time.monotonic() - sent >= 1.4


def test_compressed_bodies_reach_openwire_compressed_and_amqp_plain(broker, client):
    c = client("jms.useCompression=true")
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.zip", "persistent")
    text = "compress me " * 200
    c("send", "p", "text", text.replace(" ", "%20"))
    c("send", "p", "bytes", "00" * 500)
    c("consumer", "c", "s", "queue:ow.zip")
    assert c.receive("c")["body"] == text
    assert c.receive("c")["body"] == "00" * 500
    c("closeconsumer", "c")
    c("send", "p", "text", "zipped-for-amqp")
    m = amqp_take(broker, "ow.zip")
    assert m.body == "zipped-for-amqp"
    assert not any(str(k).startswith("x-opt-hermod") for k in (m.properties or {}))


def test_every_openwire_body_type_reaches_amqp_in_the_jms_mapping(broker, client):
    c = client()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:ow.bodies.amqp", "persistent")
    c("send", "p", "bytes", "0102")
    c("send", "p", "map", "a%3Dint%3A1%3Bb%3Dstring%3Ax")
    c("send", "p", "stream", "int%3A1%3Bstring%3Az")
    c("send", "p", "object", "obj")
    c("send", "p", "message", "-")
    data, mapped, stream, obj, plain = (amqp_take(broker, "ow.bodies.amqp") for _ in range(5))
    assert data.body == b"\x01\x02" and data.annotations["x-opt-jms-msg-type"] == 3
    assert mapped.body == {"a": 1, "b": "x"} and mapped.annotations["x-opt-jms-msg-type"] == 2
    assert stream.body == [1, "z"] and stream.annotations["x-opt-jms-msg-type"] == 4
    assert obj.content_type == "application/x-java-serialized-object" and obj.annotations["x-opt-jms-msg-type"] == 1
    assert plain.body is None and plain.annotations["x-opt-jms-msg-type"] == 0
    for m in (data, mapped, stream, obj, plain):
        assert not any(str(k).startswith("x-opt-hermod") for k in (m.properties or {}))


def test_temporary_topic_is_served_and_removed(client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "adv", "s", "topic:ActiveMQ.Advisory.TempTopic")
    c("temptopic", "tt", "s")
    assert c.receive("adv")["type"] == "Advisory"
    c("consumer", "sub", "s", "temp:tt")
    c("producer", "p", "s", "temp:tt", "nonpersistent")
    c("send", "p", "text", "to-temp-topic")
    assert c.receive("sub")["body"] == "to-temp-topic"
    c("closeconsumer", "sub")
    c("deletetemp", "tt")
    assert c.receive("adv")["type"] == "Advisory"
