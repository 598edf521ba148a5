"""SEND and SUBSCRIBE against a real broker (one per module; every test has its own addresses):
destinations, receipts, the text/bytes rule, refusals, ack modes, prefetch, selectors, durable,
exclusive and browsing subscriptions."""
from __future__ import annotations

import pytest
from stomp_clients import Raw, connect

CONFIG = """
[[address_settings]]
match = "nack.#"
max_delivery_attempts = 2

[[address_settings]]
match = "full.fail.#"
max_size_bytes = 1500
address_full_policy = "fail"

[[address_settings]]
match = "full.block.#"
max_size_bytes = 1500
address_full_policy = "block"

[[address_settings]]
match = "multi.#"
default_routing_type = "multicast"

[[address]]
name = "fq"
routing = ["multicast"]
  [[address.queue]]
  name = "fq.one"
  routing = "multicast"
  [[address.queue]]
  name = "fq.two"
  routing = "multicast"
"""


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config=CONFIG)


def session(broker, version: str = "1.2", **kw) -> Raw:
    raw = Raw(broker)
    assert raw.connect(version, **kw).command == "CONNECTED"
    return raw


def subscribe(raw: Raw, destination: str, sid: str = "s", **headers) -> None:
    pairs = [("destination", destination), ("id", sid), ("receipt", f"sub-{sid}")]
    pairs += [(k.replace("_", "-") if not k.startswith("activemq") else k.replace("__", "."), v)
              for k, v in headers.items()]
    raw.frame("SUBSCRIBE", pairs)
    assert raw.until("RECEIPT").header("receipt-id") == f"sub-{sid}"


def send(raw: Raw, destination: str, body: bytes = b"", receipt: str | None = "r", **headers) -> None:
    pairs = [("destination", destination)] + [(k.replace("_", "-"), v) for k, v in headers.items()]
    if receipt:
        pairs.append(("receipt", receipt))
    raw.frame("SEND", pairs, body)
    if receipt:
        answer = raw.next()
        assert answer.command == "RECEIPT", answer
        assert answer.header("receipt-id") == receipt


# -- SEND and destinations --------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_queue_round_trip_with_stomp_py(broker, version):
    q = f"/queue/rt{version.replace('.', '')}"
    conn, listener = connect(broker, version)
    conn.subscribe(q, id="1", ack="auto")
    conn.send(q, "héllo", headers={"colour": "red", "note": "a:b\\c\nd"} if version == "1.2" else {"colour": "red"})
    message = listener.wait_messages(1)[0]
    assert message.body == "héllo"
    assert message.headers["colour"] == "red"
    assert message.headers["destination"] == q
    assert message.headers["message-id"] and message.headers["content-length"] == str(len("héllo".encode()))
    if version == "1.2":
        assert message.headers["note"] == "a:b\\c\nd"
    conn.disconnect()


def test_message_frame_headers(broker):
    raw = session(broker)
    subscribe(raw, "/queue/hdr", ack="client-individual")
    send(raw, "/queue/hdr", b"body", content_type="text/plain", correlation_id="c-1", type="kind",
         persistent="true", priority="7", JMSXGroupID="g1", custom="v")
    m = raw.until("MESSAGE")
    assert m.header("subscription") == "s" and m.header("destination") == "/queue/hdr"
    assert m.header("ack") and m.header("message-id").startswith("ID:")
    assert (m.header("content-type"), m.header("correlation-id"), m.header("type")) == ("text/plain", "c-1", "kind")
    assert (m.header("persistent"), m.header("priority"), m.header("JMSXGroupID")) == ("true", "7", "g1")
    assert m.header("custom") == "v" and m.header("content-length") == "4" and m.body == b"body"
    assert m.header("redelivered") is None


def test_topic_is_multicast(broker):
    a, b = session(broker), session(broker)
    subscribe(a, "/topic/tp")
    subscribe(b, "/topic/tp")
    send(a, "/topic/tp", b"to all")
    assert a.until("MESSAGE").body == b"to all"
    m = b.until("MESSAGE")
    assert (m.body, m.header("destination")) == (b"to all", "/topic/tp")


def test_bare_names_follow_destination_type_else_the_settings(broker):
    raw = session(broker)
    subscribe(raw, "multi.bare", "m1")  # settings: multicast
    subscribe(raw, "multi.bare", "m2")
    send(raw, "multi.bare", b"both")
    got = sorted(raw.until("MESSAGE").header("subscription") for _ in range(2))
    assert got == ["m1", "m2"]
    subscribe(raw, "plain.bare", "q1", destination_type="ANYCAST")
    send(raw, "plain.bare", b"one", destination_type="ANYCAST")
    m = raw.until("MESSAGE")
    assert m.header("subscription") == "q1" and m.header("destination") == "/queue/plain.bare"


def test_fqqn_composites_and_wildcards(broker):
    raw = session(broker)
    subscribe(raw, "/queue/fq::fq.one", "one")
    subscribe(raw, "/topic/news.>", "news")
    subscribe(raw, "/queue/comp.a", "ca")
    subscribe(raw, "/queue/comp.b", "cb")
    send(raw, "/topic/fq", b"fq")
    assert raw.until("MESSAGE").header("subscription") == "one"
    send(raw, "/topic/news.uk.weather", b"rain")
    m = raw.until("MESSAGE")
    assert (m.header("subscription"), m.header("destination"), m.body) == ("news", "/topic/news.uk.weather", b"rain")
    send(raw, "/queue/comp.a,/queue/comp.b", b"both")
    assert sorted(raw.until("MESSAGE").header("subscription") for _ in range(2)) == ["ca", "cb"]


def test_temporary_queue_for_replies(broker):
    requester, server = session(broker), session(broker)
    subscribe(requester, "/temp-queue/replies", "replies")
    subscribe(server, "/queue/service", "svc")
    send(requester, "/queue/service", b"ping", reply_to="/temp-queue/replies")
    request = server.until("MESSAGE")
    reply_to = request.header("reply-to")
    assert reply_to.startswith("/queue/temp-queue.")
    send(server, reply_to, b"pong")
    reply = requester.until("MESSAGE")
    assert (reply.body, reply.header("destination")) == (b"pong", "/temp-queue/replies")
    requester.frame("DISCONNECT", [("receipt", "bye")])
    requester.until("RECEIPT")
    assert requester.closed_by_broker()
    server.frame("SEND", [("destination", reply_to), ("receipt", "late")], b"gone?")
    # the temporary queue went with its connection: nothing takes the message, or it is refused
    answer = server.next()
    assert answer.command in ("RECEIPT", "ERROR")


def test_text_and_bytes_bodies_with_nul(broker):
    raw = session(broker)
    subscribe(raw, "/queue/bodies")
    send(raw, "/queue/bodies", b"\x00a\x00b\x00", amq_msg_type="bytes")
    m = raw.until("MESSAGE")
    assert m.body == b"\x00a\x00b\x00" and m.header("content-length") == "5"
    raw.frame("SEND", [("destination", "/queue/bodies"), ("receipt", "t")], "déjà".encode("latin-1"), length=False)
    assert raw.until("ERROR").header("message").startswith("malformed frame")
    assert raw.closed_by_broker()


def test_latin1_text_comes_back_in_its_charset(broker):
    raw = session(broker)
    subscribe(raw, "/queue/latin")
    send(raw, "/queue/latin", "déjà".encode("latin-1"), content_type="text/plain; charset=ISO-8859-1")
    m = raw.until("MESSAGE")
    assert m.body == "déjà".encode("latin-1")


def test_full_address_under_fail_is_an_error_then_close(broker):
    raw = session(broker)
    send(raw, "/queue/full.fail.q", b"x" * 1000)
    send(raw, "/queue/full.fail.q", b"x" * 1000)
    raw.frame("SEND", [("destination", "/queue/full.fail.q"), ("receipt", "third")], b"x" * 1000)
    error = raw.until("ERROR")
    assert error.header("message").startswith("resource limit exceeded") and error.header("receipt-id") == "third"
    assert raw.closed_by_broker()


def test_full_address_under_block_withholds_the_receipt(broker):
    producer, consumer = session(broker), session(broker)
    send(producer, "/queue/full.block.q", b"x" * 1000, receipt="one")
    send(producer, "/queue/full.block.q", b"x" * 1000, receipt="two")
    producer.frame("SEND", [("destination", "/queue/full.block.q"), ("receipt", "three")], b"x" * 1000)
    with pytest.raises(AssertionError):
        producer.next(timeout=1.0)  # withheld while the address is full
    subscribe(consumer, "/queue/full.block.q")
    assert producer.until("RECEIPT").header("receipt-id") == "three"
    assert [consumer.until("MESSAGE").body for _ in range(3)] == [b"x" * 1000] * 3


# -- SUBSCRIBE, ACK, NACK ---------------------------------------------------------------------------------
def test_client_individual_acks_and_redelivery_after_a_dropped_connection(broker):
    producer = session(broker)
    for i in range(3):
        send(producer, "/queue/ci", str(i).encode())
    raw = session(broker)
    subscribe(raw, "/queue/ci", ack="client-individual")
    ms = [raw.until("MESSAGE") for _ in range(3)]
    raw.frame("ACK", [("id", ms[1].header("ack")), ("receipt", "acked")])
    assert raw.until("RECEIPT").header("receipt-id") == "acked"
    raw.close()  # dies without DISCONNECT
    again = session(broker)
    subscribe(again, "/queue/ci", ack="client-individual")
    back = [again.until("MESSAGE") for _ in range(2)]
    assert [m.body for m in back] == [b"0", b"2"]
    assert all(m.header("redelivered") == "true" for m in back)


def test_client_ack_is_cumulative_and_auto_has_no_ack_header(broker):
    producer = session(broker)
    for i in range(3):
        send(producer, "/queue/cum", str(i).encode())
    raw = session(broker)
    subscribe(raw, "/queue/cum", ack="client")
    ms = [raw.until("MESSAGE") for _ in range(3)]
    raw.frame("ACK", [("id", ms[2].header("ack")), ("receipt", "all")])
    assert raw.until("RECEIPT").header("receipt-id") == "all"
    raw.frame("DISCONNECT", [("receipt", "bye")])
    raw.until("RECEIPT")
    again = session(broker)
    subscribe(again, "/queue/cum")
    send(producer, "/queue/cum", b"new")
    m = again.until("MESSAGE")
    assert m.body == b"new" and m.header("ack") is None


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_ack_by_message_id_in_older_versions(broker, version):
    q = f"/queue/old{version.replace('.', '')}"
    raw = session(broker, version)
    subscribe(raw, q, ack="client")
    send(raw, q, b"m")
    m = raw.until("MESSAGE")
    assert m.header("ack") is None
    raw.frame("ACK", [("message-id", m.header("message-id")), ("subscription", "s"), ("receipt", "a")], version=version)
    assert raw.until("RECEIPT").header("receipt-id") == "a"


def test_unknown_ack_is_an_error(broker):
    raw = session(broker)
    raw.frame("ACK", [("id", "nope")])
    assert raw.until("ERROR").header("message").startswith("illegal state")
    assert raw.closed_by_broker()


def test_nack_counts_a_failed_attempt_then_dead_letter(broker):
    producer = session(broker)
    send(producer, "/queue/nack.q", b"poison")
    raw = session(broker)
    subscribe(raw, "/queue/nack.q", ack="client-individual")
    for attempt in range(2):
        m = raw.until("MESSAGE")
        assert m.body == b"poison"
        raw.frame("NACK", [("id", m.header("ack"))])
    dlq = session(broker)
    subscribe(dlq, "/queue/DLQ", "dlq")
    assert dlq.until("MESSAGE").body == b"poison"


def test_prefetch_bounds_unacknowledged_messages(broker):
    producer = session(broker)
    for i in range(5):
        send(producer, "/queue/pf", str(i).encode())
    raw = session(broker)
    subscribe(raw, "/queue/pf", ack="client-individual", **{"activemq__prefetchSize": "2"})
    first = [raw.until("MESSAGE") for _ in range(2)]
    with pytest.raises(AssertionError):
        raw.next(timeout=0.5)
    raw.frame("ACK", [("id", first[0].header("ack"))])
    assert raw.until("MESSAGE").body == b"2"


def test_selector(broker):
    raw = session(broker)
    subscribe(raw, "/queue/sel", selector="colour = 'red'")
    send(raw, "/queue/sel", b"blue", colour="blue")
    send(raw, "/queue/sel", b"red", colour="red")
    assert raw.until("MESSAGE").body == b"red"
    bad = session(broker)
    bad.frame("SUBSCRIBE", [("destination", "/queue/sel2"), ("id", "x"), ("selector", "colour = ")])
    assert bad.until("ERROR").header("message").startswith("invalid selector")


def test_durable_subscription_survives_the_connection_and_unsubscribe_removes_it(broker):
    sub = session(broker, extra=[("client-id", "cid1")])
    subscribe(sub, "/topic/dur", "d", **{"activemq__subscriptionName": "sub1"})
    sub.frame("DISCONNECT", [("receipt", "bye")])
    sub.until("RECEIPT")
    producer = session(broker)
    send(producer, "/topic/dur", b"while away")
    back = session(broker, extra=[("client-id", "cid1")])
    subscribe(back, "/topic/dur", "d", durable_subscription_name="sub1")
    assert back.until("MESSAGE").body == b"while away"
    back.frame("UNSUBSCRIBE", [("id", "d"), ("activemq.subscriptionName", "sub1"), ("receipt", "gone")])
    assert back.until("RECEIPT").header("receipt-id") == "gone"
    send(producer, "/topic/dur", b"nobody")
    later = session(broker, extra=[("client-id", "cid1")])
    subscribe(later, "/topic/dur", "d", **{"activemq__subscriptionName": "sub1"})
    with pytest.raises(AssertionError):
        later.next(timeout=0.5)


def test_durable_subscription_needs_a_client_id(broker):
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", "/topic/d2"), ("id", "x"), ("activemq.subscriptionName", "n")])
    assert "client-id" in raw.until("ERROR").header("message")


def test_exclusive_consumer_takes_everything(broker):
    a, b = session(broker), session(broker)
    subscribe(a, "/queue/excl", "a", **{"activemq__exclusive": "true"})
    subscribe(b, "/queue/excl", "b")
    for i in range(4):
        send(b, "/queue/excl", str(i).encode())
    assert [a.until("MESSAGE").body for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    with pytest.raises(AssertionError):
        b.next(timeout=0.3)


def test_browser_sees_without_taking(broker):
    raw = session(broker)
    for i in range(2):
        send(raw, "/queue/br", str(i).encode())
    subscribe(raw, "/queue/br", "b", browser="true")
    seen = [raw.until("MESSAGE") for _ in range(3)]
    assert [m.body for m in seen[:2]] == [b"0", b"1"] and seen[2].header("browser") == "end"
    subscribe(raw, "/queue/br", "take")
    assert [raw.until("MESSAGE").body for _ in range(2)] == [b"0", b"1"]


def test_virtual_topic_consumer_queues(broker):
    a, b = session(broker), session(broker)
    subscribe(a, "/queue/Consumer.A.VirtualTopic.Orders", "a")
    subscribe(b, "/queue/Consumer.B.VirtualTopic.Orders", "b")
    send(a, "/topic/VirtualTopic.Orders", b"order-1")
    assert a.until("MESSAGE").body == b"order-1"
    assert b.until("MESSAGE").body == b"order-1"


def test_consumer_priority(broker):
    low, high = session(broker), session(broker)
    subscribe(low, "/queue/prio", "low", **{"activemq__priority": "1"})
    subscribe(high, "/queue/prio", "high", **{"activemq__priority": "9"})
    for i in range(3):
        send(low, "/queue/prio", str(i).encode())
    assert [high.until("MESSAGE").body for _ in range(3)] == [b"0", b"1", b"2"]
    with pytest.raises(AssertionError):
        low.next(timeout=0.3)


def test_expired_messages_are_not_delivered(broker):
    raw = session(broker)
    send(raw, "/queue/exp", b"old", expires="1000")
    send(raw, "/queue/exp", b"fresh", expires="0")
    subscribe(raw, "/queue/exp")
    assert raw.until("MESSAGE").body == b"fresh"


@pytest.mark.parametrize("headers,phrase", [
    ([("destination", "/queue/" + "n" * 1100)], "longer than 1024 bytes"),
    ([("destination", "/queue/sel.long"), ("selector", "a = '" + "x" * 17000 + "'")], "selector"),
    ([("destination", ",".join(f"/queue/c{i}" for i in range(300)))], "parts"),
    ([("destination", "/queue/x"), ("ack", "sometimes")], "ack must be"),
    ([("destination", "/queue/x")], "id header"),
])
def test_limits_on_subscribe(broker, headers, phrase):
    raw = session(broker)
    if phrase != "id header":
        headers = headers + [("id", "s")]
    raw.frame("SUBSCRIBE", headers)
    error = raw.until("ERROR")
    assert phrase in error.header("message"), error.header("message")
    assert raw.closed_by_broker()


def test_a_clean_disconnect_gives_messages_back_marked_redelivered_without_an_attempt(broker):
    producer = session(broker)
    send(producer, "/queue/nack.clean", b"kept")  # nack.#: max_delivery_attempts = 2
    for _ in range(3):  # three clean goodbyes: more than the attempts allowed, none counted
        raw = session(broker)
        subscribe(raw, "/queue/nack.clean", ack="client-individual")
        m = raw.until("MESSAGE")
        assert m.body == b"kept"
        raw.frame("DISCONNECT", [("receipt", "bye")])
        raw.until("RECEIPT")
        assert raw.closed_by_broker()
    last = session(broker)
    subscribe(last, "/queue/nack.clean", ack="client-individual")
    m = last.until("MESSAGE")
    assert (m.body, m.header("redelivered")) == (b"kept", "true")
