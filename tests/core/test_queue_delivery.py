"""Delivery features in the pure core: priority, groups, consumer priority, exclusive and
last-value queues, scheduled delivery, redelivery delay, expiry."""
from __future__ import annotations

import pytest

from hermod.broker.core import links
from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.settings import SettingsRepository

from test_routing import Envelope, Sink, bodies


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def now_ms(self) -> int:
        return self.now


class Env(Envelope):
    def __init__(self, annotations=None, **kw):
        super().__init__(**kw)
        self.annotations = annotations


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def po(clock):
    po = PostOffice(clock=clock, annotate=lambda m, extra, address, clear=False: Message(m.encoded, Env(), address))
    po.create_queue("q", "q", ANYCAST)
    return po


def put(po, body, address="q", **env):
    m = Message(body.encode(), Env(**env), address, None, arrival=po.clock.now_ms())
    po.post(po.route(m, address, None))
    return m


def consumer(po, credit=100, address="q", **kw):
    sink = Sink()
    c = links.attach_consumer(po, links.ConsumerRequest(address, **kw), sink)
    c.credit = credit
    po.schedule(c.queue)
    po.run_dispatch()
    return c, sink


def fire_timers(po):
    due = [e for e in po.timers.pending if e[0] <= po.clock.now_ms()]
    for e in due:
        po.timers.pending.remove(e)
        e[1]()
    po.run_dispatch()


def test_higher_priority_first_fifo_within_a_priority(po):
    for body, p in (("a4", 4), ("b9", 9), ("c0", 0), ("d9", 9), ("e4", 4), ("f200", 200)):
        put(po, body, priority=p)
    c, sink = consumer(po)
    assert bodies(sink) == ["b9", "d9", "f200", "a4", "e4", "c0"]  # 200 is capped at 9


def test_returned_message_keeps_its_place_within_its_priority(po):
    for body, p in (("a", 5), ("b", 5), ("c", 1)):
        put(po, body, priority=p)
    c, sink = consumer(po, credit=1)
    c.queue.release(sink.got[0])
    c.credit = 3
    po.run_dispatch()
    assert bodies(sink) == ["a", "a", "b", "c"]


def group(gid, seq=None):
    props = {"group_id": gid}
    if seq is not None:
        props["group_sequence"] = seq
    return props


def test_a_group_sticks_to_one_consumer(po):
    c1, s1 = consumer(po)
    c2, s2 = consumer(po)
    for i in range(6):
        put(po, f"{'AB'[i % 2]}{i}", properties=group("AB"[i % 2]))
    po.run_dispatch()
    assert {b[0] for b in bodies(s1)} != {b[0] for b in bodies(s2)}
    assert len(set(b[0] for b in bodies(s1))) == 1 and len(set(b[0] for b in bodies(s2))) == 1


def test_group_waits_for_its_consumer_when_it_has_no_credit(po):
    c1, s1 = consumer(po, credit=1)
    c2, s2 = consumer(po, credit=10)
    put(po, "g1", properties=group("G"))
    po.run_dispatch()
    holder, other = (s1, s2) if bodies(s1) else (s2, s1)
    put(po, "g2", properties=group("G"))
    put(po, "free", properties={})
    po.run_dispatch()
    assert "g2" not in bodies(other)


def test_closing_sequence_frees_the_group(po):
    c1, s1 = consumer(po)
    put(po, "first", properties=group("G", 1))
    put(po, "last", properties=group("G", -1))
    po.run_dispatch()
    assert "G" not in c1.queue.groups


def test_groups_move_when_their_consumer_leaves(po):
    c1, s1 = consumer(po)
    put(po, "g1", properties=group("G"))
    po.run_dispatch()
    c1.queue.acknowledge(s1.got[0])
    links.detach_consumer(po, c1)
    c2, s2 = consumer(po)
    put(po, "g2", properties=group("G"))
    po.run_dispatch()
    assert bodies(s2) == ["g2"]


def test_higher_priority_consumer_served_first(po):
    low, s_low = consumer(po, priority=0)
    high, s_high = consumer(po, priority=5, credit=2)
    for i in range(4):
        put(po, str(i))
    po.run_dispatch()
    assert bodies(s_high) == ["0", "1"] and bodies(s_low) == ["2", "3"]


def test_exclusive_queue_gives_everything_to_one_consumer_then_the_next(po):
    po.create_queue("ex", "ex", ANYCAST, exclusive=True)
    c1, s1 = consumer(po, address="ex")
    c2, s2 = consumer(po, address="ex")
    for i in range(3):
        put(po, str(i), address="ex")
    po.run_dispatch()
    assert (bodies(s1), bodies(s2)) == (["0", "1", "2"], [])
    for ref in list(s1.got):
        c1.queue.acknowledge(ref)
    links.detach_consumer(po, c1)
    put(po, "3", address="ex")
    po.run_dispatch()
    assert bodies(s2) == ["3"]


def test_consumer_exclusive_option_takes_everything(po):
    c1, s1 = consumer(po)
    c2, s2 = consumer(po, exclusive=True)
    for i in range(3):
        put(po, str(i))
    po.run_dispatch()
    assert (bodies(s1), bodies(s2)) == ([], ["0", "1", "2"])


def test_last_value_queue_keeps_only_the_newest_per_key(po):
    po.create_queue("lvq", "lvq", ANYCAST, last_value_key="symbol")
    for body, sym in (("ibm 1", "IBM"), ("msft 1", "MSFT"), ("ibm 2", "IBM"), ("none", None)):
        put(po, body, address="lvq", application_properties={"symbol": sym} if sym else {})
    assert [r.message.encoded.decode() for r in po.queues["lvq"].waiting()] == ["msft 1", "ibm 2", "none"]


def test_scheduled_delivery_waits_until_due(po, clock):
    put(po, "later", annotations={"x-opt-delivery-delay": 5000})
    put(po, "at", annotations={"x-opt-delivery-time": clock.now + 2000})
    put(po, "now")
    c, sink = consumer(po)
    assert bodies(sink) == ["now"]
    assert c.queue.message_count == 3
    clock.now += 2000
    fire_timers(po)
    assert bodies(sink) == ["now", "at"]
    clock.now += 3000
    fire_timers(po)
    assert bodies(sink) == ["now", "at", "later"]


def test_scheduled_messages_due_together_open_their_priorities_in_order(po, clock):
    # Nothing has used these priorities on the queue yet: the due messages make their FIFOs.
    for body, p in (("s2", 2), ("s8", 8), ("t2", 2), ("t8", 8)):
        put(po, body, priority=p, annotations={"x-opt-delivery-delay": 1000})
    c, sink = consumer(po)
    assert bodies(sink) == []
    clock.now += 1000
    fire_timers(po)
    assert bodies(sink) == ["s8", "t8", "s2", "t2"]


def test_purging_a_queue_with_unused_priorities_then_using_them(po):
    for body, p in (("a", 3), ("b", 6)):
        put(po, body, priority=p)
    q = po.queues["q"]
    assert [r.message.encoded.decode() for r in q.take_waiting(lambda r: True)] == ["b", "a"]
    q.backlog.clear()
    assert q.message_count == 0
    for body, p in (("c", 0), ("d", 9), ("e", 3)):
        put(po, body, priority=p)
    c, sink = consumer(po)
    assert bodies(sink) == ["d", "e", "c"]


def test_redelivery_delay_holds_a_failed_message_back(po, clock):
    po.settings = SettingsRepository([("#", {"redelivery_delay_ms": 1000})])
    put(po, "m")
    c, sink = consumer(po)
    c.queue.release(sink.got[0], failed=True)
    po.run_dispatch()
    assert len(sink.got) == 1
    clock.now += 1000
    fire_timers(po)
    assert bodies(sink) == ["m", "m"] and sink.got[1].delivery_count == 2


def test_expired_messages_are_never_delivered_and_go_to_the_expiry_address(po, clock):
    put(po, "old", ttl=100)
    put(po, "fresh", ttl=100_000)
    clock.now += 500
    c, sink = consumer(po)
    assert bodies(sink) == ["fresh"]
    assert [r.message.encoded for r in po.queues["ExpiryQueue"].waiting()] == [b"old"]


def test_expiry_scan_moves_expired_messages_without_consumers(po, clock):
    put(po, "old", ttl=100)
    put(po, "abs", properties={"absolute_expiry_time": clock.now + 50})
    put(po, "keep")
    clock.now += 200
    assert po.expire_scan() == 2
    assert [r.message.encoded for r in po.queues["q"].waiting()] == [b"keep"]
    assert po.queues["q"].expired == 2


def test_expiry_without_an_expiry_address_drops(po, clock):
    po.settings = SettingsRepository([("#", {"expiry_address": ""})])
    put(po, "old", ttl=10)
    clock.now += 20
    assert po.expire_scan() == 1
    assert "ExpiryQueue" not in po.queues and po.queues["q"].message_count == 0


def test_address_size_is_accounted(po):
    m = put(po, "12345")
    assert po.addresses["q"].size == m.size
    c, sink = consumer(po)
    c.queue.acknowledge(sink.got[0])
    assert po.addresses["q"].size == 0 and po.flow.memory_used == 0
