"""A STOMP RECEIPT means stored: a persistent SEND answered before a SIGKILL is there after the
restart, and a durable subscription made over STOMP outlives the broker."""
from __future__ import annotations

from stomp_clients import Raw


def session(broker, extra=()) -> Raw:
    raw = Raw(broker)
    assert raw.connect("1.2", extra=extra).command == "CONNECTED"
    return raw


def test_receipted_sends_survive_a_kill(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'stomp.db'}"
    broker = start_broker(store=store)
    raw = session(broker, extra=[("client-id", "keeper")])
    raw.frame("SUBSCRIBE", [("destination", "/topic/kept.t"), ("id", "d"), ("activemq.subscriptionName", "n"),
                            ("receipt", "sub")])
    assert raw.until("RECEIPT").header("receipt-id") == "sub"
    raw.frame("DISCONNECT", [("receipt", "bye")])
    raw.until("RECEIPT")
    producer = session(broker)
    for i in range(20):
        producer.frame("SEND", [("destination", "/queue/kept.q"), ("persistent", "true"), ("receipt", f"r{i}")],
                       f"m{i}".encode())
    producer.frame("SEND", [("destination", "/topic/kept.t"), ("persistent", "true"), ("receipt", "t")], b"topic")
    assert [producer.until("RECEIPT").header("receipt-id") for _ in range(21)] == [f"r{i}" for i in range(20)] + ["t"]
    broker.kill()
    again = start_broker(store=store)
    consumer = session(again, extra=[("client-id", "keeper")])
    consumer.frame("SUBSCRIBE", [("destination", "/queue/kept.q"), ("id", "q")])
    assert [consumer.until("MESSAGE").body for _ in range(20)] == [f"m{i}".encode() for i in range(20)]
    consumer.frame("SUBSCRIBE", [("destination", "/topic/kept.t"), ("id", "d"), ("activemq.subscriptionName", "n")])
    m = consumer.until("MESSAGE")
    assert (m.body, m.header("persistent")) == (b"topic", "true")


def test_a_durable_subscription_answered_is_stored(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'stomp-sub.db'}"
    broker = start_broker(store=store)
    raw = session(broker, extra=[("client-id", "quick")])
    raw.frame("SUBSCRIBE", [("destination", "/topic/quick.t"), ("id", "d"), ("activemq.subscriptionName", "n"),
                            ("receipt", "sub")])
    assert raw.until("RECEIPT").header("receipt-id") == "sub"
    broker.kill()  # at once: the RECEIPT promised the subscription is stored
    again = start_broker(store=store)
    producer = session(again)
    producer.frame("SEND", [("destination", "/topic/quick.t"), ("receipt", "r")], b"for the subscription")
    assert producer.until("RECEIPT").header("receipt-id") == "r"
    back = session(again, extra=[("client-id", "quick")])
    back.frame("SUBSCRIBE", [("destination", "/topic/quick.t"), ("id", "d"), ("activemq.subscriptionName", "n")])
    assert back.until("MESSAGE").body == b"for the subscription"
