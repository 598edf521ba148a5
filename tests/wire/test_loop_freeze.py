"""One hostile request must not freeze the event loop: while it is processed, a bystander's round
trip on another connection completes within BOUND (a correctness bound: before the fixes these
took tens of seconds or minutes). Also the contract's limits on names, selectors and composites."""
from __future__ import annotations

import threading
import time

import pytest
from proton import Delivery, Message

from wire_helpers import DurableSubscription, LinkDetached, Selector, connect, receive_bodies, topic

BOUND = 5.0  # seconds for one bystander round trip


class Bystander:
    """A well-behaved client doing send-and-receive round trips on its own queue."""

    def __init__(self, url: str):
        self.conn = connect(url)
        self.sender = self.conn.create_sender("bystander")
        self.receiver = self.conn.create_receiver("bystander")
        self.n = 0

    def round_trip(self) -> float:
        self.n += 1
        started = time.monotonic()
        self.sender.send(Message(body=f"ping {self.n}"))
        assert receive_bodies(self.receiver, 1, timeout=2 * BOUND) == [f"ping {self.n}"]
        return time.monotonic() - started

    def close(self) -> None:
        self.conn.close()


class Hostile(threading.Thread):
    """Runs `action(connection)` on its own connection; keeps the result or the exception."""

    def __init__(self, url: str, action):
        super().__init__(daemon=True)
        self.url, self.action = url, action
        self.started_action = threading.Event()
        self.result = self.error = None

    def run(self) -> None:
        conn = connect(self.url)
        try:
            self.started_action.set()
            self.result = self.action(conn)
        except Exception as e:  # noqa: BLE001 - kept for the test to assert on
            self.error = e
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the broker may have closed it
                pass


def bystander_is_served_during(url: str, action, round_trips: int = 3) -> Hostile:
    bystander = Bystander(url)
    bystander.round_trip()  # connected and warm before the hostile request
    hostile = Hostile(url, action)
    hostile.start()
    assert hostile.started_action.wait(BOUND)
    for _ in range(round_trips):
        took = bystander.round_trip()
        assert took < BOUND, f"bystander round trip took {took:.1f}s while the hostile request ran"
    hostile.join(6 * BOUND)
    assert not hostile.is_alive()
    bystander.close()
    return hostile


def refused(error) -> str:
    assert isinstance(error, LinkDetached), error
    return error.condition


# -- names ----------------------------------------------------------------------------------


def test_a_60_kb_address_beside_a_wildcard_subscription_is_refused_without_freezing(broker):
    # Matching `#.#` against 30,000 words took ~10 s (quadratic); the name is refused by length.
    watcher = connect(broker.url)
    watcher.create_receiver("#.#", options=[topic()])
    huge = ".".join(["a"] * 30_000)
    hostile = bystander_is_served_during(broker.url, lambda c: c.create_sender(huge, name="hostile", options=[topic()]))
    assert refused(hostile.error) == "amqp:invalid-field"
    watcher.close()


@pytest.mark.parametrize("source", ["n" * 1025, "orders::" + "q" * 1025, "é" * 513])
def test_source_names_over_1024_bytes_are_invalid_field(broker, source):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver(source)
    assert e.value.condition == "amqp:invalid-field"
    conn.create_receiver("n" * 1024).close()  # at the limit: fine
    conn.close()


def test_target_name_over_1024_bytes_is_invalid_field(broker):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_sender("t" * 1025)
    assert e.value.condition == "amqp:invalid-field"
    conn.close()


def test_subscription_name_from_a_huge_link_name_is_invalid_field(broker):
    conn = connect(broker.url, container_id="cid")
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("news", name="s" * 2000, options=[topic(), DurableSubscription()])
    assert e.value.condition == "amqp:invalid-field"
    conn.close()


def test_anonymous_relay_to_over_1024_bytes_is_rejected_with_invalid_field(broker):
    conn = connect(broker.url)
    sender = conn.create_sender(None)
    delivery = sender.send(Message(address="r" * 5000, body="x"), error_states=[])
    assert delivery.remote_state == Delivery.REJECTED
    assert delivery.remote.condition.name == "amqp:invalid-field"
    good = conn.create_receiver("relay.ok")
    sender.send(Message(address="relay.ok", body="fine"))
    assert receive_bodies(good, 1) == ["fine"]
    conn.close()


# -- selectors -----------------------------------------------------------------------------


def test_selector_over_16_kib_is_invalid_field(broker):
    conn = connect(broker.url)
    too_long = " OR ".join(f"k = 'v{i:05d}'" for i in range(1200))  # ~18 KiB
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("sel.long", options=[Selector(too_long)])
    assert e.value.condition == "amqp:invalid-field"
    conn.close()


def _fill(conn, address: str, n: int, **fields) -> None:
    """Send n messages without waiting for each (one wait for all settlements)."""
    sender = conn.create_sender(address)
    deliveries = [sender.link.send(Message(body=i, **fields)) for i in range(n)]
    conn.wait(lambda: all(d.remote_state for d in deliveries), timeout=120)
    assert all(d.remote_state == Delivery.ACCEPTED for d in deliveries)
    sender.close()


def test_selector_consumer_over_a_big_non_matching_backlog_does_not_freeze_the_loop(broker):
    # Each evaluation of this 15 KB selector costs ~0.2 ms: a pass over 20,000 messages was
    # 4 s, and every arrival started another pass over all of them.
    selector = " OR ".join(f"k = 'v{i:04d}'" for i in range(1000))
    filler = connect(broker.url)
    _fill(filler, "sel.backlog", 20_000, properties={"k": "none"})

    def consume_and_keep_sending(conn):
        receiver = conn.create_receiver("sel.backlog", options=[Selector(selector)], credit=10)
        sender = conn.create_sender("sel.backlog")
        for i in range(30):
            sender.send(Message(body=f"miss {i}", properties={"k": "none"}))
        sender.send(Message(body="hit", properties={"k": "v0999"}))
        return receive_bodies(receiver, 1, timeout=60)

    hostile = bystander_is_served_during(broker.url, consume_and_keep_sending)
    assert hostile.error is None, hostile.error
    assert hostile.result == ["hit"]
    # Nothing was lost on the way: a plain consumer still finds every non-matching message.
    plain = filler.create_receiver("sel.backlog", credit=1000)
    got = receive_bodies(plain, 20_030, timeout=60)
    assert len(got) == 20_030
    filler.close()


# -- composites ----------------------------------------------------------------------------


def test_a_composite_target_of_9000_parts_is_refused_without_freezing(broker):
    huge = ",".join(f"p{i}" for i in range(9_000))
    hostile = bystander_is_served_during(broker.url, lambda c: c.create_sender(huge, name="hostile"))
    assert refused(hostile.error) == "amqp:resource-limit-exceeded"


def test_composite_source_over_256_parts_is_refused(broker):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver(",".join(f"s{i}" for i in range(257)))
    assert e.value.condition == "amqp:resource-limit-exceeded"
    conn.close()


def test_composite_target_of_256_parts_reaches_every_part(broker):
    conn = connect(broker.url)
    first = conn.create_receiver("c0")
    last = conn.create_receiver("c255")
    sender = conn.create_sender(",".join(f"c{i}" for i in range(256)))
    sender.send(Message(body="to all"))
    assert receive_bodies(first, 1) == ["to all"]
    assert receive_bodies(last, 1) == ["to all"]
    conn.close()
