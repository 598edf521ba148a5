"""A 200,000-message backlog in the pure core: removals from its middle (reject, dead letter,
expiry, last-value replacement) leave the rest in order, and a selector consumer looks at each
waiting message once, not once per dispatch pass. Counts and order only, never wall-clock time."""
from __future__ import annotations

import pytest

from hermod.broker.core import links
from hermod.broker.core import queue as queue_module
from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice

from test_queue_delivery import Clock, Env, fire_timers, put
from test_routing import Sink, bodies

N = 200_000
# A budgeted dispatch pass looks at SCAN_BUDGET messages, then carries on at a timer.
PASSES = N // queue_module.SCAN_BUDGET + 3


@pytest.fixture
def po():
    po = PostOffice(clock=Clock(), annotate=lambda m, extra, address, clear=False: Message(m.encoded, Env(), address))
    po.create_queue("q", "q", ANYCAST)
    return po


def fill(po, n=N, address="q", **env_of) -> None:
    """Messages "0" .. "n-1"; `env_of[name](i)` gives an envelope field of message i."""
    for i in range(n):
        put(po, str(i), address, **{k: f(i) for k, f in env_of.items()})


def attach(po, address="q", credit=10**7, selector=None):
    sink = Sink()
    req = links.ConsumerRequest(address, selector="s" if selector else None, selector_predicate=selector)
    c = links.attach_consumer(po, req, sink)
    c.credit = credit
    po.schedule(c.queue)
    po.run_dispatch()
    return c, sink


def settle_all(po, passes=PASSES) -> int:
    """Fire carry-on timers until nothing is pending; returns the passes it took."""
    for n in range(passes):
        if not po.timers.pending:
            return n
        fire_timers(po)
    raise AssertionError(f"dispatch still carrying on after {passes} passes")


def drain(po, address="q") -> list[str]:
    c, sink = attach(po, address)
    settle_all(po)
    for ref in list(sink.got):
        c.queue.acknowledge(ref)
    links.detach_consumer(po, c)
    return bodies(sink)


def assert_compact(queue) -> None:
    """No tombstone is left behind in the FIFOs or among the parked refs."""
    backlog = queue.backlog
    assert backlog.dead == 0 or backlog.dead <= backlog.count
    in_fifos = sum(len(level) for level in backlog.levels)
    assert in_fifos == backlog.count + backlog.dead
    parked = backlog.parked
    assert len(parked.entries) - parked.head - parked.live <= max(1024, parked.live)


def middle(i: int) -> bool:
    """140,000 of the 200,000, all in the middle: more tombstones than live refs (compaction)."""
    return 20_000 <= i < 180_000 and i % 8 != 0


def test_expiry_from_the_middle_compacts_and_keeps_the_rest_in_order(po):
    fill(po, ttl=lambda i: 100 if middle(i) else 0)
    po.clock.now += 1000
    removed = sum(1 for i in range(N) if middle(i))
    assert po.expire_scan() == removed
    q = po.queues["q"]
    assert q.message_count == N - removed
    assert_compact(q)
    assert q.backlog.dead < removed  # compacted once tombstones outnumbered the live refs
    expected = [str(i) for i in range(N) if not middle(i)]
    assert [r.message.encoded.decode() for r in q.waiting()] == expected
    assert drain(po) == expected
    assert q.message_count == 0 and q.backlog.dead == 0
    assert len(po.queues["ExpiryQueue"].waiting()) == removed


def test_dead_letters_from_the_middle_leave_tombstones_that_dispatch_skips(po):
    fill(po)
    q = po.queues["q"]
    waiting = q.waiting()
    gone = set(range(90_000, 110_000, 3))
    for i in sorted(gone):
        po.dead_letter(waiting[i], reason="test")
    assert q.backlog.dead == len(gone)  # fewer than the live ones: left as tombstones
    expected = [str(i) for i in range(N) if i not in gone]
    assert drain(po) == expected
    assert q.message_count == 0 and q.backlog.dead == 0
    assert [r.message.encoded.decode() for r in po.queues["DLQ"].waiting()] == [str(i) for i in sorted(gone)]


def test_last_value_replacement_from_the_middle_keeps_the_order(po):
    po.create_queue("lvq", "lvq", ANYCAST, last_value_key="k")
    fill(po, address="lvq", application_properties=lambda i: {"k": i})
    replaced = range(60_000, 140_000, 2)
    for i in replaced:
        put(po, f"new {i}", "lvq", application_properties={"k": i})
    q = po.queues["lvq"]
    assert q.message_count == N
    assert_compact(q)
    kept = set(range(N)) - set(replaced)
    expected = [str(i) for i in sorted(kept)] + [f"new {i}" for i in replaced]
    assert drain(po, "lvq") == expected
    assert q.message_count == 0 and not q._last_values


def test_rejects_from_the_middle_behind_a_selector_leave_the_rest_in_order(po):
    wanted = set(range(100_000, 110_000, 7))
    fill(po, application_properties=lambda i: {"take": i in wanted})
    picky, sink = attach(po, selector=lambda m: m.application_properties.get("take") is True)
    settle_all(po)
    assert sorted(int(b) for b in bodies(sink)) == sorted(wanted)
    for ref in list(sink.got):
        picky.queue.reject(ref)
    q = po.queues["q"]
    assert q.backlog.parked.live == N - len(wanted)  # looked at once, parked
    links.detach_consumer(po, picky)
    assert drain(po) == [str(i) for i in range(N) if i not in wanted]
    assert [r.message.encoded.decode() for r in po.queues["DLQ"].waiting()] == [str(i) for i in sorted(wanted)]


def test_expiry_among_parked_refs_compacts_and_keeps_each_consumers_place(po):
    calls = []

    def never(m):
        calls.append(m)
        return False

    fill(po, ttl=lambda i: 100 if middle(i) else 0)
    picky, _ = attach(po, selector=never)
    settle_all(po)
    q = po.queues["q"]
    assert q.backlog.parked.live == N
    seen = len(calls)
    assert seen <= 2 * N
    po.clock.now += 1000
    removed = sum(1 for i in range(N) if middle(i))
    assert po.expire_scan() == removed
    parked = q.backlog.parked
    assert parked.live == N - removed and len(parked.entries) - parked.head < N  # compacted
    # The picky consumer keeps its place past everything it turned down: nothing is looked at again.
    put(po, "late")
    po.run_dispatch()
    settle_all(po)
    assert len(calls) - seen <= 2
    expected = [str(i) for i in range(N) if not middle(i)] + ["late"]
    assert [r.message.encoded.decode() for r in q.waiting()] == expected
    links.detach_consumer(po, picky)
    assert drain(po) == expected


def test_a_selector_looks_at_each_waiting_message_once():
    po = PostOffice(clock=Clock())
    po.create_queue("q", "q", ANYCAST)
    calls = []

    def wanted(m):
        calls.append(m)
        return m.encoded.startswith(b"match")

    fill(po)
    c, sink = attach(po, selector=wanted)
    put(po, "match 1")
    po.run_dispatch()
    passes = settle_all(po)
    assert bodies(sink) == ["match 1"]
    assert passes <= PASSES
    assert len(calls) <= 2 * (N + 1)  # the backlog scanned once (choose, then park)

    # Behind the scanned backlog, each new message costs a bounded number of predicate calls.
    before = len(calls)
    for i in range(100):
        put(po, f"miss {i}")
        po.run_dispatch()
        settle_all(po, passes=3)
    assert len(calls) - before <= 2 * 100
    before = len(calls)
    put(po, "match 2")
    po.run_dispatch()
    settle_all(po, passes=3)
    assert bodies(sink) == ["match 1", "match 2"]
    assert len(calls) - before <= 2

    # Out of credit and back: the new credit looks only at what arrived meanwhile.
    c.credit = 0
    for i in range(100):
        put(po, f"miss while blocked {i}")
    put(po, "match 3")
    po.run_dispatch()
    before = len(calls)
    c.credit = 10
    po.schedule(c.queue)
    po.run_dispatch()
    settle_all(po, passes=3)
    assert bodies(sink) == ["match 1", "match 2", "match 3"]
    assert len(calls) - before <= 2 * 101
    assert c.queue.message_count == N + 200 + 3


def test_taking_waiting_messages_skips_tombstones_and_includes_parked_ones(po):
    """Management purge/move (`take_waiting`) after removals and parking: exactly the live
    waiting messages, in order, each once, and the memory accounting back to zero."""
    fill(po, 5000, ttl=lambda i: 100 if 1000 <= i < 1010 else 0)
    po.clock.now += 1000
    assert po.expire_scan() == 10
    picky, sink = attach(po, selector=lambda m: m.encoded == b"4999")
    settle_all(po)
    assert bodies(sink) == ["4999"]
    q = po.queues["q"]
    assert q.backlog.parked.live == 4989  # looked at and turned down: parked
    picky.credit = 0
    for i in range(10):  # in the FIFO, behind the parked ones (picky has no credit left)
        put(po, f"late {i}", ttl=100 if i % 2 else 0)
    po.clock.now += 1000
    assert po.expire_scan() == 5  # five tombstones in the FIFO
    po.run_dispatch()
    taken = q.take_waiting(lambda ref: True)
    expected = [str(i) for i in range(4999) if not 1000 <= i < 1010] + [f"late {i}" for i in range(0, 10, 2)]
    assert [r.message.encoded.decode() for r in taken] == expected
    assert q.message_count == 1 and not q.waiting()  # only the one out with picky
    assert q.backlog.dead == 0 and len(q.backlog) == 0
    q.acknowledge(sink.got[0])
    assert q.size == 0 and q.held == 0
