"""Deleting a deep durable queue through management on a real broker: the store keeps no
reference and no message of it (there are no foreign keys to cascade since revision 0005,
store.integrity), messages shared with another queue stay, and a broker restarted by SIGKILL
recovers exactly the other queue."""
from __future__ import annotations

from proton import Message

from durable_clients import AsyncProducer, StoreView, queue_stats, receive_exactly
from hermod.broker.tools.clients import management_call

DEPTH = 10_000
KEPT = 50
KEPT_QUEUE = """
[[address.queue]]
name = "kept"
routing = "multicast"
durable = true
filter = "n < 50"
"""
# "deep" is configured only for the first run: a restart with it would create it again.
FIRST = """
[[address]]
name = "fan"
routing = ["multicast"]
[[address.queue]]
name = "deep"
routing = "multicast"
durable = true
""" + KEPT_QUEUE
RESTART = """
[[address]]
name = "fan"
routing = ["multicast"]
""" + KEPT_QUEUE


def _send(url: str, count: int) -> None:
    messages = [(n, Message(body=f"m{n}", durable=True, properties={"n": n}))
                for n in range(count)]
    producer = AsyncProducer(url, "fan", messages, window=500).start()
    producer.join(timeout=120)
    assert not producer.errors and not producer.refused
    assert len(producer.accepted) == count


def test_deleting_a_deep_queue_leaves_no_reference_nor_unshared_message(brokers):
    broker = brokers.start(FIRST)
    _send(broker.url, DEPTH)
    stats = queue_stats(broker.url)
    assert (stats["deep"]["messages"], stats["kept"]["messages"]) == (DEPTH, KEPT)

    management_call(broker.url, "queue.delete", timeout=60, args={"name": "deep"})
    assert "deep" not in queue_stats(broker.url)
    with StoreView(brokers.store_url) as store:
        # Management answers once the store has the deletion (test_management_stored.py).
        assert store.queue_names() == {"kept"}
        assert store.scalar("SELECT count(*) FROM message_refs") == KEPT
        assert store.message_count() == KEPT
        assert store.scalar("SELECT count(*) FROM messages m WHERE NOT EXISTS"
                            " (SELECT 1 FROM message_refs r WHERE r.message_id = m.id)") == 0

    brokers.kill()
    broker = brokers.start(RESTART)
    assert set(queue_stats(broker.url)) >= {"kept"} and "deep" not in queue_stats(broker.url)
    got = receive_exactly(broker.url, "fan::kept", KEPT)
    assert [m.properties["n"] for m in got] == list(range(KEPT))
