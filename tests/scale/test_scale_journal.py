"""The journal of a cluster node (docs/scale-out.md, sections 1 and 6): every commit runs the
ownership fence (a queue created in a commit becomes this node's; a commit touching another
live node's queue fails as a whole), and recovery reads the references of the owned queues only."""
from __future__ import annotations

from hermod import store
from hermod.store.ownership import Membership, OwnershipLost
from store_testing import queue, send, setup_ops, submit_and_wait

LEASE_S = 60.0


def node(engines, url, name):
    membership = Membership(engines(url), "test", name, LEASE_S, announce=f"amqp://{name}:5672")
    membership.join()
    return membership


def test_created_queues_are_claimed_and_another_nodes_queue_refuses_the_commit(scale_db, engines):
    url = scale_db[2]
    a, b = node(engines, url, "node-a"), node(engines, url, "node-b")
    journal_a = store.open_journal(url, None, membership=a)
    journal_b = store.open_journal(url, None, membership=b)
    try:
        assert submit_and_wait(journal_a, setup_ops(queue("qa"))) is None
        assert submit_and_wait(journal_b, setup_ops(queue("qb"))) is None
        assert a.owner("qa").node == "node-a" and a.owner("qb").node == "node-b"
        assert submit_and_wait(journal_a, send(1, "qa", address="qa")) is None
        refused = submit_and_wait(journal_a, send(2, "qa", "qb", address="qa"))
        assert isinstance(refused, OwnershipLost) and "qb" in str(refused)
        # nothing of the refused unit was stored, not even its part on the owned queue
        recovered = journal_b.recover()
        assert [r.message.id for r in recovered.references["qa"]] == [1]
        assert recovered.references["qb"] == []
    finally:
        journal_a.close()
        journal_b.close()


def test_recovery_reads_only_the_owned_queues_references(scale_db, engines):
    url = scale_db[2]
    a = node(engines, url, "node-a")
    journal = store.open_journal(url, None, membership=a)
    try:
        assert submit_and_wait(journal, setup_ops(queue("q1"), queue("q2"))) is None
        assert submit_and_wait(journal, send(1, "q1", address="q1")) is None
        assert submit_and_wait(journal, send(2, "q2", address="q2")) is None
        recovered = journal.recover(queues=frozenset({"q2"}))
        assert sorted(q.name for q in recovered.queues) == ["q1", "q2"]  # every definition
        assert list(recovered.references) == ["q2"]
        assert [r.message.id for r in recovered.references["q2"]] == [2]
        assert recovered.more == frozenset()
    finally:
        journal.close()
