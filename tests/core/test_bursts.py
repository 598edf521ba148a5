"""`core.bursts`: a producer link's durable sends of a turn as one journal unit. Here, what a
committed burst leaves behind: nothing of its messages (a link that sent a burst of large
messages and went quiet must not keep them alive after they are consumed)."""
from __future__ import annotations

import gc

from test_core_transactions import Journal, consume, msg

from hermod.broker.core.bursts import Burst
from hermod.broker.core.message import ANYCAST
from hermod.broker.core.postoffice import PostOffice


def reachable(root: object, skip: object) -> list:
    """Every object reachable from `root` through references the collector knows, not going
    into `skip` (the post office, which holds its queues) or any class or module."""
    seen: dict[int, object] = {id(skip): skip}
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, type(gc))):
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
    del seen[id(skip)]
    return list(seen.values())


def test_a_committed_burst_keeps_none_of_its_messages():
    journal = Journal()
    journal.hold = True
    po = PostOffice(journal=journal)
    po.create_queue("orders", "orders", ANYCAST)
    settled: list = []
    burst = Burst(po, lambda tokens, outcomes: settled.append((list(tokens), outcomes)))
    c, sink = consume(po, "orders")
    for n in range(3):
        plan = po.route(msg(f"m{n}", "orders", durable=True), "orders", ANYCAST)
        assert po.post_part(plan, burst, f"d{n}")
    journal.complete()
    po.run_dispatch()
    assert settled == [(["d0"], None), (["d1"], None), (["d2"], None)]  # no open_unit: one each
    assert [r.message.encoded for r in sink.got] == [b"m0", b"m1", b"m2"]
    messages = [r.message for r in sink.got]
    for r in sink.got:
        po.queues["orders"].acknowledge(r)
    sink.got.clear()
    found = {id(o) for o in reachable(burst, po)}
    assert not [m for m in messages if id(m) in found]
