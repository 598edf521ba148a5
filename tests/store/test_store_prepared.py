"""Prepared transaction branches in the store, on both back-ends: stored whole (messages kept in
the record, on no queue), recovered after a reopen, replaced when prepared again, forgotten in
the unit that commits them; their message ids are never handed out again."""
from __future__ import annotations

from hermod.broker.core.ports import (AddMessage, AddReference, DeleteReference, ForgetTransaction,
                                      PrepareTransaction, PreparedRecord)
from store_testing import message, queue, send, setup_ops, submit_and_wait, table_counts

XID = b"\x00\x00\x00\x01\x00\x00\x00\x02g1b"


def branch(xid: bytes = XID, sent: int = 7) -> PreparedRecord:
    # every byte value survives the record's encoding
    sent_message = message(sent, address="out", body=bytes(range(256)))
    return PreparedRecord(xid, ((sent_message, ("out",)),), (("in", 1),))


def test_a_prepared_branch_comes_back_after_reopen_and_its_ids_are_not_reused(store_url, open_store):
    journal = open_store(store_url)
    assert submit_and_wait(journal, setup_ops(queue("in"), queue("out"))) is None
    assert submit_and_wait(journal, send(1, "in")) is None
    assert submit_and_wait(journal, [PrepareTransaction(branch())]) is None
    journal.close()

    recovered = open_store(store_url).recover()

    assert recovered.prepared == [branch()]
    assert [r.message.id for r in recovered.references["in"]] == [1]  # still stored, in doubt
    assert recovered.references["out"] == []  # the held send is on no queue yet
    assert recovered.next_message_id == 8


def test_commit_stores_the_sends_deletes_the_acks_and_forgets_the_branch_in_one_unit(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("in"), queue("out")))
    submit_and_wait(journal, send(1, "in"))
    submit_and_wait(journal, [PrepareTransaction(branch())])
    sent = branch().sends[0][0]
    assert submit_and_wait(journal, [AddMessage(sent), AddReference("out", sent.id),
                                     DeleteReference("in", 1), ForgetTransaction(XID)]) is None

    recovered = journal.recover()

    assert recovered.prepared == []
    assert [r.message.id for r in recovered.references["out"]] == [7]
    assert recovered.references["in"] == []
    assert table_counts(journal.engine)["messages"] == 1


def test_preparing_again_replaces_and_forgetting_an_unknown_branch_is_harmless(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("in"), queue("out")))
    assert submit_and_wait(journal, [PrepareTransaction(branch(sent=5))]) is None
    assert submit_and_wait(journal, [PrepareTransaction(branch(sent=6))]) is None
    assert submit_and_wait(journal, [ForgetTransaction(b"never prepared")]) is None
    assert journal.recover().prepared == [branch(sent=6)]
    assert submit_and_wait(journal, [ForgetTransaction(XID)]) is None
    assert journal.recover().prepared == []
