"""The memory limit counts messages in journal units the store has not committed yet: a store
slower than its producers holds them back (no credit) instead of buffering without bound."""
from __future__ import annotations

from test_core_transactions import Journal, msg

from hermod.broker.core.flow import BLOCK
from hermod.broker.core.message import ANYCAST
from hermod.broker.core.postoffice import PostOffice


def test_uncommitted_units_count_against_the_memory_limit():
    journal = Journal()
    journal.hold = True  # the store is slow: nothing commits until complete()
    po = PostOffice(journal=journal)
    po.create_queue("slow", "slow", ANYCAST)  # durable: each durable send is a journal unit
    po.flow.memory_limit = 10_000
    for i in range(5):
        po.post(po.route(msg("x" * 2_500, "slow", durable=True), "slow", ANYCAST), lambda error: None)
    assert po.queues["slow"].message_count == 0
    assert po.flow.pending_bytes == 12_500
    assert po.flow.verdict("slow") == BLOCK and not po.flow.may_grant_credit("slow")
    woken = []
    po.flow.wait("producer", lambda: woken.append(True))
    journal.complete()
    po.run_dispatch()
    assert po.flow.pending_bytes == 0
    assert po.queues["slow"].message_count == 5  # now counted on the queue instead
    assert woken == [True]  # the waiting producer is asked again
    assert po.flow.verdict("slow") == BLOCK  # 12,500 bytes on the queue: still over


def test_a_failed_unit_gives_its_bytes_back():
    journal = Journal()
    journal.hold = True
    po = PostOffice(journal=journal)
    po.create_queue("slow", "slow", ANYCAST)
    po.flow.memory_limit = 10_000
    journal.fail_next = RuntimeError("disk full")
    po.post(po.route(msg("x" * 20_000, "slow", durable=True), "slow", ANYCAST), lambda error: None)
    assert po.flow.verdict("slow") == BLOCK
    journal.complete()
    assert po.flow.pending_bytes == 0 and po.flow.verdict("slow") is None
