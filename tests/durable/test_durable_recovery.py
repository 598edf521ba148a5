"""What a restart on the same store brings back, on both back-ends: addresses and queues
(configured ones even when the configuration no longer lists them, auto-created anycast queues,
durable subscriptions, virtual-topic consumer queues) with their attributes, durable messages
in their order and priority order with their delivery counts, scheduled messages; and what it
must not bring back: temporary queues, non-durable messages, anything of a non-durable queue.

To keep broker starts few, one scenario per back-end (`recovered`) sets up every case on its own
addresses, checks the store's tables where the case is about the store, SIGKILLs the broker and
starts it again; each test then checks one case on the recovered broker. A SIGKILL because
whatever the client saw confirmed must be there without the help of a clean shutdown. Where a
case needs a write nobody waits for (a queue record, a delivery count) to be committed before
the kill, the scenario sends a durable marker on the same connection and waits for its
`accepted`: the journal commits units in submission order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from proton import Described, Message, symbol
from proton.reactor import DurableSubscription, Filter

from durable_clients import (DurableBrokers, StoreView, address_stats, body_of, queue_stats,
                             receive_exactly, send_durable)
from wire_helpers import Dynamic, connect, nothing_more, settle_modified, topic

MARKER_QUEUE = "rec.marker"
PRIORITIES = [1, 9, 4, 4, 7, 1, 9, 0, 4]
VIRTUAL_TOPIC_QUEUE = "Consumer.A.VirtualTopic.Orders"


def durable(body, **fields) -> Message:
    return Message(body=body, durable=True, **fields)


def bodies(messages) -> list:
    return [body_of(m) for m in messages]


def commit_barrier(conn) -> None:
    """Everything this connection did before is committed once this durable marker is
    accepted (one journal, units in order). The marker stays on its own queue."""
    sender = conn.create_sender(MARKER_QUEUE)
    sender.send(durable("marker"))
    sender.close()


# Present before the restart only: these queues come back from the store alone.
CONFIGURED = """
[[address]]
name = "rec.events"
routing = ["multicast"]

[[address.queue]]
name = "rec.events.red"
routing = "multicast"
filter = "color = 'red'"
max_consumers = 3

[[address]]
name = "rec.prices"
routing = ["anycast"]

[[address.queue]]
name = "rec.prices"
routing = "anycast"
exclusive = true
last_value_key = "symbol"
"""

# Present before and after: non-durable queues exist only because the configuration says so.
VOLATILE = """
[[address]]
name = "rec.volatile"
routing = ["anycast"]

[[address.queue]]
name = "rec.volatile"
routing = "anycast"
durable = false

[[address]]
name = "rec.fanout"
routing = ["multicast"]

[[address.queue]]
name = "rec.fanout.kept"
routing = "multicast"

[[address.queue]]
name = "rec.fanout.also"
routing = "multicast"

[[address.queue]]
name = "rec.fanout.volatile"
routing = "multicast"
durable = false
"""


@dataclass
class Recovered:
    brokers: DurableBrokers
    failed_counts_seen: list = field(default_factory=list)
    counts_stored: list = field(default_factory=list)
    temporary_queue: str = ""
    before: dict = field(default_factory=dict)  # store facts checked while the broker ran

    @property
    def url(self) -> str:
        return self.brokers.url


def set_up_everything(brokers: DurableBrokers) -> Recovered:
    facts = Recovered(brokers)
    url = brokers.url
    # Configured queues with attributes.
    send_durable(url, "topic://rec.events",
                 [durable(f"{c}-1", properties={"color": c}) for c in ("red", "blue")])
    send_durable(url, "rec.prices", [durable(f"{s}{n}", properties={"symbol": s})
                                     for s, n in (("A", 1), ("B", 1), ("A", 2))])
    # An auto-created anycast queue; priorities.
    send_durable(url, "rec.auto", [durable(f"m{i}") for i in range(20)])
    send_durable(url, "rec.prio", [durable(f"p{p}-{i}", priority=p) for i, p in enumerate(PRIORITIES)])
    # A durable subscription, detached; a virtual-topic consumer queue, its consumer gone.
    conn = connect(url, container_id="cid")
    conn.create_receiver("rec.news", name="sub", options=[DurableSubscription(), topic()]).detach()
    conn.create_receiver(VIRTUAL_TOPIC_QUEUE).close()
    conn.close()
    send_durable(url, "topic://rec.news", [durable(f"n{i}") for i in range(3)])
    send_durable(url, "topic://VirtualTopic.Orders", [durable(f"o{i}") for i in range(3)])
    # Delivery counts: two failed deliveries (modified, delivery-failed) and one released.
    send_durable(url, "rec.count", [durable("fragile"), durable("fine")])
    send_durable(url, "rec.released", [durable("again")])
    conn = connect(url)
    receiver = conn.create_receiver("rec.count", credit=1)
    for _ in range(2):
        facts.failed_counts_seen.append(receiver.receive(timeout=10).delivery_count)
        settle_modified(receiver, failed=True)
    receiver.close()
    receiver = conn.create_receiver("rec.released", credit=1)
    receiver.receive(timeout=10)
    receiver.release()
    receiver.close()
    # A temporary queue; non-durable messages between durable ones.
    temporary = conn.create_receiver(None, options=[Dynamic()])
    facts.temporary_queue = temporary.link.remote_source.address
    conn.create_sender(facts.temporary_queue).send(durable("to a temporary queue"))
    mixed = conn.create_sender("rec.mixed")
    for message in (Message(body="volatile-1"), durable("kept"), Message(body="volatile-2")):
        mixed.send(message)
    # Durable messages to non-durable queues.
    sender = conn.create_sender("rec.volatile")
    for i in range(5):
        sender.send(durable(f"v{i}"))
    conn.create_sender("topic://rec.fanout").send(durable("both"))
    commit_barrier(conn)

    with StoreView(brokers.store_url) as store:
        facts.counts_stored = [r.delivery_count for r in store.refs_of("rec.count")]
        facts.before = {
            "queues": store.queue_names(),
            "addresses": store.address_names(),
            "mixed refs": len(store.refs_of("rec.mixed")),
            "fanout.kept refs": len(store.refs_of("rec.fanout.kept")),
            "messages to volatile": store.scalar(
                "SELECT count(*) FROM messages WHERE address = 'rec.volatile'"),
            "refs of the fanout message": store.scalar(
                "SELECT count(*) FROM message_refs r JOIN messages m ON m.id = r.message_id"
                " WHERE m.address = 'rec.fanout'"),
            "fanout messages": store.scalar(
                "SELECT count(*) FROM messages WHERE address = 'rec.fanout'"),
            "messages to the temporary queue": store.scalar(
                "SELECT count(*) FROM messages WHERE address = :name", name=facts.temporary_queue),
        }
    facts.before["mixed in memory"] = queue_stats(url)["rec.mixed"]["messages"]
    conn.close()
    return facts


@pytest.fixture(scope="module")
def recovered(module_brokers) -> Recovered:
    module_brokers.start(CONFIGURED + VOLATILE)
    facts = set_up_everything(module_brokers)
    module_brokers.kill()
    module_brokers.start(VOLATILE)
    return facts


def test_configured_addresses_and_queues_come_back_without_the_config(recovered):
    url = recovered.url
    addresses = address_stats(url)
    assert addresses["rec.events"]["routing_types"] == ["multicast"]
    assert addresses["rec.prices"]["routing_types"] == ["anycast"]
    queues = queue_stats(url)
    assert queues["rec.events.red"]["messages"] == 1 and queues["rec.events.red"]["durable"]
    assert queues["rec.prices"]["messages"] == 2  # A1 was replaced by A2 (last value)
    with StoreView(recovered.brokers.store_url) as store:
        (red,) = store.rows("SELECT * FROM queues WHERE name = 'rec.events.red'")
        assert (red.address, red.routing_type, red.filter, red.max_consumers) == (
            "rec.events", "multicast", "color = 'red'", 3)
        (prices,) = store.rows("SELECT * FROM queues WHERE name = 'rec.prices'")
        assert (bool(prices.exclusive), prices.last_value_key) == (True, "symbol")

    # The recovered queues behave with their attributes: the filter filters, the last-value
    # key replaces.
    send_durable(url, "topic://rec.events",
                 [durable(f"{c}-2", properties={"color": c}) for c in ("blue", "red")])
    send_durable(url, "rec.prices", [durable("B2", properties={"symbol": "B"})])
    assert bodies(receive_exactly(url, "rec.events::rec.events.red", 2)) == ["red-1", "red-2"]
    assert bodies(receive_exactly(url, "rec.prices", 2)) == ["A2", "B2"]


def test_auto_created_anycast_queue_comes_back_with_its_messages_in_order(recovered):
    stats = queue_stats(recovered.url)["rec.auto"]
    assert (stats["routing_type"], stats["durable"], stats["messages"]) == ("anycast", True, 20)
    assert bodies(receive_exactly(recovered.url, "rec.auto", 20)) == [f"m{i}" for i in range(20)]


def test_priority_order_survives_restart(recovered):
    expected = [f"p{p}-{i}" for i, p in sorted(enumerate(PRIORITIES), key=lambda e: (-e[1], e[0]))]
    assert bodies(receive_exactly(recovered.url, "rec.prio", len(PRIORITIES))) == expected


def test_detached_durable_subscription_resumes_after_restart(recovered):
    url = recovered.url
    stats = queue_stats(url)["cid.sub"]
    assert (stats["address"], stats["routing_type"], stats["durable"], stats["messages"]) == (
        "rec.news", "multicast", True, 3)
    # Published after the restart while nobody is attached: the subscription still collects.
    send_durable(url, "topic://rec.news", [durable("n3")])
    got = receive_exactly(url, "rec.news", 4, name="sub", container_id="cid",
                          options=[DurableSubscription(), topic()])
    assert bodies(got) == ["n0", "n1", "n2", "n3"]


def test_virtual_topic_consumer_queue_comes_back(recovered):
    url = recovered.url
    stats = queue_stats(url)[VIRTUAL_TOPIC_QUEUE]
    assert (stats["address"], stats["routing_type"], stats["durable"], stats["messages"]) == (
        "VirtualTopic.Orders", "multicast", True, 3)
    send_durable(url, "topic://VirtualTopic.Orders", [durable("o3")])
    assert bodies(receive_exactly(url, VIRTUAL_TOPIC_QUEUE, 4)) == ["o0", "o1", "o2", "o3"]


def test_failed_delivery_counts_survive_restart(recovered):
    # modified{delivery-failed} raised the count each time, and the store has it ...
    assert recovered.failed_counts_seen == [0, 1]
    assert recovered.counts_stored == [2, 0]
    # ... so the first delivery after the restart says two earlier attempts failed.
    got = receive_exactly(recovered.url, "rec.count", 2)
    assert [(body_of(m), m.delivery_count) for m in got] == [("fragile", 2), ("fine", 0)]


def test_released_message_does_not_count_a_failed_attempt(recovered):
    (got,) = receive_exactly(recovered.url, "rec.released", 1)
    assert (body_of(got), got.delivery_count) == ("again", 0)


def test_temporary_queues_and_non_durable_messages_do_not_come_back(recovered):
    before = recovered.before
    assert recovered.temporary_queue not in before["queues"]
    assert recovered.temporary_queue not in before["addresses"]
    assert before["messages to the temporary queue"] == 0
    assert (before["mixed in memory"], before["mixed refs"]) == (3, 1)
    assert recovered.temporary_queue not in queue_stats(recovered.url)
    assert recovered.temporary_queue not in address_stats(recovered.url)
    assert bodies(receive_exactly(recovered.url, "rec.mixed", 1)) == ["kept"]


def test_non_durable_queues_never_touch_the_store(recovered):
    before = recovered.before
    assert "rec.volatile" not in before["queues"] and "rec.fanout.volatile" not in before["queues"]
    assert "rec.fanout.kept" in before["queues"]
    assert before["messages to volatile"] == 0
    # The multicast message is stored once, referenced by the two durable subscribers only.
    assert before["fanout messages"] == 1
    assert before["fanout.kept refs"] == 1 and before["refs of the fanout message"] == 2
    queues = queue_stats(recovered.url)
    assert queues["rec.volatile"]["messages"] == 0
    assert queues["rec.fanout.volatile"]["messages"] == 0
    assert queues["rec.fanout.kept"]["messages"] == 1 and queues["rec.fanout.also"]["messages"] == 1


# -- cases with a broker of their own ---------------------------------------------------------


def test_clean_restart_keeps_scheduled_messages_waiting_and_drops_non_durable_ones(brokers):
    soon_ms, hour_ms = 1500, 3_600_000
    brokers.start()
    sent_at = time.time()
    conn = connect(brokers.url)
    sender = conn.create_sender("rec.sched")
    sender.send(durable("in an hour", annotations={symbol("x-opt-delivery-delay"): hour_ms}))
    sender.send(durable("soon", annotations={symbol("x-opt-delivery-delay"): soon_ms}))
    sender.send(Message(body="volatile"))
    sender.send(durable("now"))
    conn.close()
    # A clean shutdown writes nothing more: the non-durable message is gone all the same.
    assert brokers.stop() == 0
    brokers.start()
    assert queue_stats(brokers.url)["rec.sched"]["messages"] == 3
    conn = connect(brokers.url)
    receiver = conn.create_receiver("rec.sched", credit=10)
    received_at = {}
    for _ in range(2):
        body = body_of(receiver.receive(timeout=10))
        received_at[body] = time.time()
        receiver.accept()
    # In either order: "soon" may be due by the time the broker is back (it is first in line).
    assert sorted(received_at) == ["now", "soon"]
    # Due at arrival + delay; arrival came after `sent_at` (clock granularity allowance).
    assert received_at["soon"] >= sent_at + soon_ms / 1000 - 0.02
    # The schedule came back with the message: an hour's delay still holds.
    assert nothing_more(receiver, timeout=0.5)
    conn.close()
    assert queue_stats(brokers.url)["rec.sched"]["messages"] == 1


def no_local() -> Filter:
    """The no-local filter on a receiver's source (JMS noLocal)."""
    return Filter({symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])})


def test_durable_subscription_keeps_its_no_local_filter_after_restart(brokers):
    brokers.start()
    options = [DurableSubscription(), topic(), no_local()]
    conn = connect(brokers.url, container_id="nl")
    conn.create_receiver("rec.chat", name="mine", options=options).detach()
    commit_barrier(conn)
    conn.close()
    brokers.kill()
    brokers.start()
    send_durable(brokers.url, "topic://rec.chat", [durable("own message")], container_id="nl")
    send_durable(brokers.url, "topic://rec.chat", [durable("from another")], container_id="other")
    got = receive_exactly(brokers.url, "rec.chat", 1, name="mine", container_id="nl",
                          options=options)
    assert bodies(got) == ["from another"]
