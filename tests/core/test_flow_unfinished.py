"""The reservation call every protocol adapter uses for what a client has not finished sending
(issue 28 finding 12): bytes reserved count against the memory limit like queued messages, a
reservation that would go over is refused with nothing counted, and giving them back wakes
producers held back by the limit."""
from __future__ import annotations

from test_core_transactions import msg

from hermod.broker.core.flow import BLOCK, Unfinished
from hermod.broker.core.message import ANYCAST
from hermod.broker.core.postoffice import PostOffice


def test_reservations_count_against_the_limit_and_refuse_past_it():
    po = PostOffice()
    po.create_queue("q", "q", ANYCAST, durable=False)
    flow = po.flow
    flow.memory_limit = 10_000
    po.post_now(po.route(msg("x" * 3_000, "q"), "q", ANYCAST))  # 3,000 bytes + overhead on a queue
    queued = flow.memory_used
    first, second = Unfinished(flow), Unfinished(flow)
    assert first.reserve(4_000)
    first.add(b"a" * 4_000)
    assert not second.reserve(10_000 - queued - 4_000 + 1)  # one byte over: refused
    assert flow.reserved == 4_000 and len(second) == 0  # nothing counted for the refusal
    assert second.reserve(10_000 - queued - 4_000)  # exactly up to the limit: fits
    assert flow.verdict("q") == BLOCK  # the broker is full: producers get no more credit
    woken = []
    flow.wait("producer", lambda: woken.append(True))
    second.drop()  # aborted, or its link ended
    assert first.take() == b"a" * 4_000  # complete: handed out, the reservation given back
    assert flow.reserved == 0 and len(first) == 0 and not first.started
    po.run_dispatch()
    assert woken == [True]
    assert flow.verdict("q") is None
