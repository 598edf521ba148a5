"""The same STOMP scenarios against Hermod and Debian's ActiveMQ Classic 5.17.2 (the broker whose
STOMP names and behaviour the contract follows), compared observation by observation. Where the
contract deliberately differs from Classic, DIFFERENCES says so and why, and each side's answer
is pinned. Each scenario uses destinations of its own; the marker message technique (send a
marker, the first message read must be it) proves "nothing else is there" without waiting."""
from __future__ import annotations

import uuid

import pytest
from peers.classic import ClassicBroker, missing
from stomp_clients import Raw

MESSAGE_HEADERS = {"destination", "subscription", "message-id", "ack"}


@pytest.fixture(scope="module")
def brokers(start_module_broker, tmp_path_factory):
    why = missing()
    if why:
        pytest.fail(f"{why}: run `make activemq-deps`")
    classic = ClassicBroker(tmp_path_factory.mktemp("classic"), persistent=False, protocols=("stomp",)).start()
    classic.address = f"127.0.0.1:{classic.stomp_port}"  # as BrokerProcess.address is
    try:
        yield {"hermod": start_module_broker(), "classic": classic}
    finally:
        classic.stop()


def session(broker, version: str = "1.2", extra=()) -> Raw:
    raw = Raw(broker)
    frame = raw.connect(version, extra=extra)
    assert frame.command == "CONNECTED", frame
    return raw


def receipt(raw: Raw, command: str, headers, body: bytes = b"", length: bool = True) -> str:
    raw.frame(command, [*headers, ("receipt", "r")], body, length=length)
    return raw.until("RECEIPT").header("receipt-id")


def first_body(raw: Raw, destination: str, sid: str = "m") -> bytes:
    """Subscribe (auto) and return the first body: with a marker sent first, what was left."""
    raw.frame("SUBSCRIBE", [("destination", destination), ("id", sid)])
    return raw.until("MESSAGE").body


def name(tag: str) -> str:
    return f"cmp.{tag}.{uuid.uuid4().hex[:8]}"


# -- scenarios: each returns what a client observes ------------------------------------------------------
def negotiation(broker) -> dict:
    out = {}
    for offered in ("1.0,1.1", "1.1,1.2", "1.2"):
        raw = Raw(broker)
        out[offered] = raw.connect(offered).header("version")
        raw.close()
    raw = Raw(broker)
    raw.send(b"CONNECT\naccept-version:9.9\nhost:/\n\n\x00")
    out["unsupported"] = raw.next().command
    return out


def text_round_trip(broker) -> dict:
    q = "/queue/" + name("text")
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "s"), ("ack", "client-individual")])
    receipt(raw, "SEND", [("destination", q), ("colour", "red"), ("note", "a:b\\c")], "héllo".encode(), length=False)
    m = raw.until("MESSAGE")
    return {"body": m.body, "colour": m.header("colour"), "note": m.header("note"),
            "destination": m.header("destination") == q, "headers": MESSAGE_HEADERS & {k for k, _ in m.headers},
            "content-length": m.header("content-length")}


def bytes_round_trip(broker) -> dict:
    q = "/queue/" + name("bytes")
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "s")])
    receipt(raw, "SEND", [("destination", q)], b"\x00a\x00b")
    m = raw.until("MESSAGE")
    return {"body": m.body, "content-length": m.header("content-length")}


def receipts_in_order(broker) -> dict:
    q = "/queue/" + name("rcpt")
    raw = session(broker)
    for i, (command, headers) in enumerate([("SUBSCRIBE", [("destination", q), ("id", "s")]),
                                            ("SEND", [("destination", q)]), ("UNSUBSCRIBE", [("id", "s")])]):
        raw.frame(command, [*headers, ("receipt", f"r{i}")])
    return {"receipts": [raw.until("RECEIPT").header("receipt-id") for _ in range(3)]}


def individual_acks_then_drop(broker) -> dict:
    q = "/queue/" + name("ci")
    producer = session(broker)
    for i in range(3):
        receipt(producer, "SEND", [("destination", q)], str(i).encode(), length=False)
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "s"), ("ack", "client-individual")])
    ms = [raw.until("MESSAGE") for _ in range(3)]
    receipt(raw, "ACK", [("id", ms[1].header("ack"))])
    raw.close()
    again = session(broker)
    again.frame("SUBSCRIBE", [("destination", q), ("id", "s")])
    back = [again.until("MESSAGE") for _ in range(2)]
    return {"bodies": [m.body for m in back], "redelivered": [m.header("redelivered") for m in back]}


def cumulative_ack(broker) -> dict:
    q = "/queue/" + name("cum")
    producer = session(broker)
    for i in range(3):
        receipt(producer, "SEND", [("destination", q)], str(i).encode(), length=False)
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "s"), ("ack", "client")])
    ms = [raw.until("MESSAGE") for _ in range(3)]
    receipt(raw, "ACK", [("id", ms[2].header("ack"))])
    receipt(raw, "DISCONNECT", [])
    receipt(producer, "SEND", [("destination", q)], b"marker", length=False)
    return {"left": first_body(session(broker), q)}


def transactions(broker) -> dict:
    q = "/queue/" + name("tx")
    raw = session(broker)
    raw.frame("BEGIN", [("transaction", "t1")])
    raw.frame("SEND", [("destination", q), ("transaction", "t1")], b"committed")
    raw.frame("BEGIN", [("transaction", "t2")])
    raw.frame("SEND", [("destination", q), ("transaction", "t2")], b"aborted")
    receipt(raw, "ABORT", [("transaction", "t2")])
    receipt(raw, "COMMIT", [("transaction", "t1")])
    receipt(raw, "SEND", [("destination", q)], b"marker")
    c = session(broker)
    c.frame("SUBSCRIBE", [("destination", q), ("id", "s")])
    return {"bodies": [c.until("MESSAGE").body for _ in range(2)]}


def durable_subscription(broker) -> dict:
    t = "/topic/" + name("dur")
    client_id = name("cid")
    sub = session(broker, extra=[("client-id", client_id)])
    receipt(sub, "SUBSCRIBE", [("destination", t), ("id", "d"), ("activemq.subscriptionName", "n")])
    receipt(sub, "DISCONNECT", [])
    producer = session(broker)
    receipt(producer, "SEND", [("destination", t)], b"while away", length=False)
    back = session(broker, extra=[("client-id", client_id)])
    back.frame("SUBSCRIBE", [("destination", t), ("id", "d"), ("activemq.subscriptionName", "n")])
    kept = back.until("MESSAGE").body
    # Classic's way: close the subscriber, then remove the subscription by its name
    receipt(back, "UNSUBSCRIBE", [("id", "d")])
    receipt(back, "UNSUBSCRIBE", [("id", "d"), ("activemq.subscriptionName", "n")])
    receipt(back, "DISCONNECT", [])  # Classic refuses a second connection with the same client-id
    receipt(producer, "SEND", [("destination", t)], b"gone", length=False)
    later = session(broker, extra=[("client-id", client_id)])
    receipt(later, "SUBSCRIBE", [("destination", t), ("id", "d"), ("activemq.subscriptionName", "n")])
    receipt(producer, "SEND", [("destination", t)], b"marker", length=False)
    return {"kept": kept, "after unsubscribe": later.until("MESSAGE").body}


def browsing(broker) -> dict:
    q = "/queue/" + name("br")
    raw = session(broker)
    for i in range(2):
        receipt(raw, "SEND", [("destination", q)], str(i).encode(), length=False)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "b"), ("browser", "true")])
    seen = [raw.until("MESSAGE") for _ in range(3)]
    return {"bodies": [m.body for m in seen[:2]], "end": seen[2].header("browser"),
            "left": first_body(raw, q, "take")}


def exclusive(broker) -> dict:
    q = "/queue/" + name("ex")
    a, b = session(broker), session(broker)
    receipt(a, "SUBSCRIBE", [("destination", q), ("id", "a"), ("activemq.exclusive", "true")])
    receipt(b, "SUBSCRIBE", [("destination", q), ("id", "b")])
    for i in range(3):
        receipt(b, "SEND", [("destination", q)], str(i).encode(), length=False)
    return {"exclusive got": [a.until("MESSAGE").body for _ in range(3)]}


def selector(broker) -> dict:
    q = "/queue/" + name("sel")
    raw = session(broker)
    receipt(raw, "SUBSCRIBE", [("destination", q), ("id", "s"), ("selector", "colour = 'red'")])
    receipt(raw, "SEND", [("destination", q), ("colour", "blue")], b"blue", length=False)
    receipt(raw, "SEND", [("destination", q), ("colour", "red")], b"red", length=False)
    return {"first": raw.until("MESSAGE").body}


def bad_frame(broker) -> dict:
    raw = session(broker)
    raw.send(b"BOGUS\n\n\x00")
    error = raw.until("ERROR")
    return {"error": error.command, "has message": bool(error.header("message")), "closed": raw.closed_by_broker()}


def persistent_header(broker) -> dict:
    q = "/queue/" + name("pers")
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", q), ("id", "s")])
    receipt(raw, "SEND", [("destination", q), ("persistent", "true"), ("priority", "7"),
                          ("correlation-id", "c1"), ("type", "t")], b"p", length=False)
    m = raw.until("MESSAGE")
    return {k: m.header(k) for k in ("persistent", "priority", "correlation-id", "type")}


def temp_queue_reply_to(broker) -> dict:
    service = "/queue/" + name("svc")
    requester, server = session(broker), session(broker)
    receipt(requester, "SUBSCRIBE", [("destination", "/temp-queue/replies"), ("id", "r")])
    receipt(server, "SUBSCRIBE", [("destination", service), ("id", "s")])
    receipt(requester, "SEND", [("destination", service), ("reply-to", "/temp-queue/replies")], b"ping", length=False)
    reply_to = server.until("MESSAGE").header("reply-to")
    receipt(server, "SEND", [("destination", reply_to)], b"pong", length=False)
    reply = requester.until("MESSAGE")
    return {"reply-to prefix": reply_to.rsplit("/", 1)[0] + "/", "reply": reply.body,
            "reply destination": reply.header("destination")}


def bare_name(broker) -> dict:
    """A destination without /queue/ or /topic/."""
    bare = name("bare")
    raw = session(broker)
    raw.frame("SUBSCRIBE", [("destination", bare), ("id", "s"), ("receipt", "s")])
    answer = raw.next()
    if answer.command != "RECEIPT":
        return {"subscribe": answer.command}
    receipt(raw, "SEND", [("destination", bare)], b"bare", length=False)
    m = raw.until("MESSAGE")
    return {"subscribe": "RECEIPT", "body": m.body, "destination": m.header("destination") == "/queue/" + bare}


SCENARIOS = [negotiation, text_round_trip, bytes_round_trip, receipts_in_order, individual_acks_then_drop,
             cumulative_ack, transactions, durable_subscription, browsing, exclusive, selector, bad_frame,
             persistent_header, temp_queue_reply_to, bare_name]

# Observations where the contract departs from Classic on purpose: (scenario, key) -> why.
DIFFERENCES = {
    ("text_round_trip", "content-length"): "the contract puts content-length on every MESSAGE; Classic leaves it "
                                           "off text messages",
    ("temp_queue_reply_to", "reply-to prefix"): "Classic names another connection's temporary queue "
                                                "/remote-temp-queue/; Hermod gives its address as /queue/ADDRESS "
                                                "(contract: reply-to is /queue/N or /topic/N)",
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_as_classic(brokers, scenario):
    hermod = scenario(brokers["hermod"])
    classic = scenario(brokers["classic"])
    for key in sorted(set(hermod) | set(classic)):
        why = DIFFERENCES.get((scenario.__name__, key))
        if why is None:
            assert hermod.get(key) == classic.get(key), (key, "hermod", hermod.get(key), "classic", classic.get(key))
        else:
            assert hermod.get(key) != classic.get(key), ("a difference DIFFERENCES claims is gone", key)
            print(f"{scenario.__name__} {key}: hermod {hermod.get(key)!r}, classic {classic.get(key)!r} ({why})")


def durable_in_use(broker) -> dict:
    """UNSUBSCRIBE naming a durable subscription while its subscriber is open."""
    t = "/topic/" + name("inuse")
    sub = session(broker, extra=[("client-id", name("cid"))])
    receipt(sub, "SUBSCRIBE", [("destination", t), ("id", "d"), ("activemq.subscriptionName", "n")])
    sub.frame("UNSUBSCRIBE", [("id", "d"), ("activemq.subscriptionName", "n"), ("receipt", "u")])
    return {"answer": sub.next().command}


def test_unsubscribe_of_a_durable_subscription_in_use(brokers):
    """Classic refuses to remove a durable subscription whose subscriber is open (the UNSUBSCRIBE
    carries both its id and its name); Hermod closes the subscriber and removes it, as the
    contract's "UNSUBSCRIBE with activemq.subscriptionName" reads. Both sides pinned."""
    assert durable_in_use(brokers["hermod"]) == {"answer": "RECEIPT"}
    assert durable_in_use(brokers["classic"]) == {"answer": "ERROR"}


def second_client_id(broker) -> dict:
    client_id = name("twice")
    first = session(broker, extra=[("client-id", client_id)])
    second = Raw(broker)
    answer = second.connect("1.2", extra=[("client-id", client_id)]).command
    first.close()
    return {"second connection": answer}


def test_a_client_id_in_use(brokers):
    """Classic refuses a second connection with a client-id already connected
    (InvalidClientIDException); Hermod, like its AMQP side with container ids, lets both connect
    (a durable subscription still has one subscriber at a time: the second SUBSCRIBE to it is
    refused). Both sides pinned."""
    assert second_client_id(brokers["hermod"]) == {"second connection": "CONNECTED"}
    assert second_client_id(brokers["classic"]) == {"second connection": "ERROR"}
