"""core.lingering: kept queues wait out their terminus expiry timeout on one timer; a consumer
attaching stops the countdown; many countdowns cost one armed timer and a heap."""
from __future__ import annotations

from hermod.broker.core.message import MULTICAST
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.queue import Consumer


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def now_ms(self) -> int:
        return self.now


def fire_due(po: PostOffice, clock: Clock) -> None:
    for due, fn in sorted(po.timers.pending, key=lambda e: e[0]):
        if due <= clock.now and (due, fn) in po.timers.pending:
            po.timers.pending.remove((due, fn))
            fn()


def make(po: PostOffice, name: str):
    return po.create_queue(name, "news", MULTICAST, durable=False, purpose="subscription", temporary=True)


def test_a_kept_queue_goes_when_its_timeout_runs_out_and_not_before():
    clock = Clock()
    po = PostOffice(clock=clock)
    q = make(po, "sub-1")
    po.lingering.keep(q, ("cid", "link"))
    po.lingering.expire_in(q, 5000)
    clock.now += 4999
    fire_due(po, clock)
    assert "sub-1" in po.queues and po.lingering.find(("cid", "link")) == "sub-1"
    clock.now += 1
    fire_due(po, clock)
    assert "sub-1" not in po.queues and po.lingering.find(("cid", "link")) is None
    assert len(po.lingering) == 0


def test_a_consumer_attaching_stops_the_countdown():
    clock = Clock()
    po = PostOffice(clock=clock)
    q = make(po, "sub-2")
    po.lingering.keep(q, ("cid", "link"))
    po.lingering.expire_in(q, 1000)
    q.add_consumer(Consumer(q, link=None))
    clock.now += 10_000
    fire_due(po, clock)
    assert "sub-2" in po.queues and not q.lingering and len(po.lingering) == 0


def test_many_countdowns_share_one_timer():
    clock = Clock()
    po = PostOffice(clock=clock)
    queues = [make(po, f"s{i}") for i in range(2000)]
    for i, q in enumerate(queues):
        po.lingering.keep(q)
        po.lingering.expire_in(q, 10_000 + i)
    assert len(po.timers.pending) == 1  # armed at the earliest only
    clock.now += 10_000 + 999
    fire_due(po, clock)
    assert len(po.queues) == 1000 and len(po.timers.pending) == 1
    clock.now += 1000
    fire_due(po, clock)
    assert not po.queues and not po.timers.pending and len(po.lingering) == 0


def test_a_queue_deleted_meanwhile_is_forgotten():
    clock = Clock()
    po = PostOffice(clock=clock)
    q = make(po, "sub-3")
    po.lingering.keep(q, ("cid", "link"))  # waiting for its session to end: no countdown yet
    po.delete_queue("sub-3")
    assert len(po.lingering) == 0 and po.lingering.find(("cid", "link")) is None
