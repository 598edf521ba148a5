"""Transactions in the core, driven directly: held sends and acknowledgements, commit as one
journal unit, rollback, rollback-only, and the registry of open transactions."""
from __future__ import annotations

import pytest

from test_routing import Envelope  # the codec's fields as plain values

from hermod.broker.core import errors, links, ports
from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.settings import SettingsRepository
from hermod.broker.core.transactions import TransactionTimedOut, Transactions, UnknownTransaction


class Journal:
    """A durable journal that records each unit of work; `hold` keeps units waiting until
    `complete()`, `fail_next` makes the next unit fail."""

    durable = True

    def __init__(self):
        self.units: list[list] = []
        self.waiting: list = []
        self.hold = False
        self.fail_next: BaseException | None = None

    def submit(self, ops, done) -> None:
        self.units.append(list(ops))
        error, self.fail_next = self.fail_next, None
        if self.hold:
            self.waiting.append((done, error))
        elif done is not None:
            done(error)

    def complete(self) -> None:
        waiting, self.waiting = self.waiting, []
        for done, error in waiting:
            if done is not None:
                done(error)

    def recover(self):
        return ports.Recovered([], [], {}, 1)

    def read_page(self, queue, after_message_id, limit, done) -> None:
        done([])

    def close(self) -> None:
        pass


class Sink:
    """The adapter side of a consumer: records what the queue sends."""

    def __init__(self):
        self.got = []

    def send(self, consumer, ref):
        self.got.append(ref)

    def queue_deleted(self, consumer):
        pass


class Discharge:
    """Records what a commit reports."""

    def __init__(self):
        self.calls: list = []

    def __call__(self, error):
        self.calls.append(error)


def msg(body: str, address: str, durable: bool = False) -> Message:
    return Message(body.encode(), Envelope(durable), address, ANYCAST)


def consume(po: PostOffice, address: str, credit: int = 100):
    sink = Sink()
    c = links.attach_consumer(po, links.ConsumerRequest(address, ANYCAST), sink)
    c.credit = credit
    return c, sink


def send(po: PostOffice, address: str, *bodies: str, durable: bool = False) -> None:
    for b in bodies:
        po.post(po.route(msg(b, address, durable), address, ANYCAST))
    po.run_dispatch()


def hold_send(po: PostOffice, txn, address: str, body: str, durable: bool = False) -> None:
    txn.add_send(po.route(msg(body, address, durable), address, ANYCAST))


def bodies(refs) -> list[str]:
    return [r.message.encoded.decode() for r in refs]


@pytest.fixture
def journal():
    return Journal()


@pytest.fixture
def po(journal):
    po = PostOffice(journal=journal)
    po.create_queue("in", "in", ANYCAST)
    po.create_queue("out", "out", ANYCAST)
    return po


@pytest.fixture
def txns():
    return Transactions()


# -- sends ----------------------------------------------------------------------------------------
def test_sends_reach_their_queue_only_at_commit(po, txns):
    c, sink = consume(po, "out")
    txn = txns.declare()
    hold_send(po, txn, "out", "a")
    hold_send(po, txn, "out", "b")
    po.run_dispatch()
    assert po.queues["out"].message_count == 0 and sink.got == []
    done = Discharge()
    txn.commit(po, done)
    po.run_dispatch()
    assert done.calls == [None]
    assert bodies(sink.got) == ["a", "b"]


def test_rollback_drops_the_sends(po, txns):
    c, sink = consume(po, "out")
    txn = txns.declare()
    hold_send(po, txn, "out", "a")
    txn.rollback()
    po.run_dispatch()
    assert po.queues["out"].message_count == 0 and sink.got == []


def test_a_queue_deleted_before_commit_takes_nothing(po, txns):
    txn = txns.declare()
    hold_send(po, txn, "out", "a", durable=True)
    po.delete_queue("out")
    done = Discharge()
    txn.commit(po, done)
    assert done.calls == [None]


# -- acknowledgements -----------------------------------------------------------------------------
def test_acks_apply_at_commit(po, txns):
    send(po, "in", "a", "b")
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    for ref in sink.got:
        txn.acquire(ref)
    q = po.queues["in"]
    assert (q.message_count, q.acked) == (2, 0)
    txn.commit(po, Discharge())
    assert (q.message_count, q.acked) == (0, 2)


def test_rollback_returns_settled_acquisitions_to_the_queue_as_an_attempt(po, txns):
    send(po, "in", "a")
    c, sink = consume(po, "in", credit=1)
    po.run_dispatch()
    txn = txns.declare()
    txn.acquire(sink.got[0], settled=True)
    txn.rollback()
    c.credit = 1
    po.run_dispatch()
    assert bodies(sink.got) == ["a", "a"]
    assert sink.got[1].delivery_count == 2  # the rolled-back delivery counted as an attempt


def test_rollback_leaves_unsettled_acquisitions_with_their_consumer_count_raised(po, txns):
    send(po, "in", "a")
    c, sink = consume(po, "in", credit=5)
    po.run_dispatch()
    ref = sink.got[0]
    txn = txns.declare()
    acquisition = txn.acquire(ref, handle="delivery-1")
    assert ref not in c.in_flight  # held by the transaction now
    txn.rollback()
    po.run_dispatch()
    assert acquisition.kept and acquisition.handle == "delivery-1"
    assert ref in c.in_flight and ref.delivery_count == 2
    assert len(sink.got) == 1  # not sent again: the consumer still has it
    po.queues["in"].acknowledge(ref)
    assert po.queues["in"].message_count == 0


def test_a_consumer_leaving_before_commit_does_not_give_back_what_the_transaction_holds(po, txns):
    send(po, "in", "a")
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    txn.acquire(sink.got[0])
    links.detach_consumer(po, c)
    q = po.queues["in"]
    assert q.message_count == 1
    txn.commit(po, Discharge())
    assert (q.message_count, q.acked) == (0, 1)


def test_a_consumer_leaving_then_rollback_puts_the_message_back(po, txns):
    send(po, "in", "a")
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    acquisition = txn.acquire(sink.got[0])
    links.detach_consumer(po, c)
    txn.rollback()
    assert not acquisition.kept
    other, got = consume(po, "in")
    po.run_dispatch()
    assert bodies(got.got) == ["a"]


def test_rollback_counts_towards_max_delivery_attempts(journal):
    settings = SettingsRepository([("#", {"max_delivery_attempts": 1, "dead_letter_address": "DLQ"})])
    po = PostOffice(settings, journal=journal,
                    annotate=lambda m, extra, address, *_: Message(m.encoded, m.envelope, address))
    po.create_queue("in", "in", ANYCAST)
    send(po, "in", "poison")
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = Transactions().declare()
    txn.acquire(sink.got[0], settled=True)
    txn.rollback()
    assert po.queues["in"].message_count == 0
    assert po.queues["DLQ"].message_count == 1


# -- one journal unit ------------------------------------------------------------------------------
def test_a_commit_is_one_journal_unit(po, txns, journal):
    send(po, "in", "a", durable=True)
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    txn.acquire(sink.got[0])
    hold_send(po, txn, "out", "x", durable=True)
    hold_send(po, txn, "out", "y", durable=True)
    hold_send(po, txn, "out", "not stored")  # non-durable: no row, same unit
    before = len(journal.units)
    txn.commit(po, Discharge())
    assert len(journal.units) == before + 1
    unit = journal.units[-1]
    assert [type(op).__name__ for op in unit] == [
        "DeleteReference", "AddMessage", "AddReference", "AddMessage", "AddReference"]
    assert unit[0] == ports.DeleteReference("in", sink.got[0].message.id)
    # the acknowledgement went with the unit: acknowledging submits nothing more
    assert len(journal.units) == before + 1


def test_nothing_changes_until_the_store_confirms(po, txns, journal):
    send(po, "in", "a", durable=True)
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    txn.acquire(sink.got[0])
    hold_send(po, txn, "out", "x", durable=True)
    journal.hold = True
    done = Discharge()
    txn.commit(po, done)
    assert done.calls == []
    assert (po.queues["in"].acked, po.queues["out"].message_count) == (0, 0)
    journal.complete()
    assert done.calls == [None]
    assert (po.queues["in"].acked, po.queues["out"].message_count) == (1, 1)


def test_a_store_failure_rolls_the_transaction_back(po, txns, journal):
    send(po, "in", "a", durable=True)
    c, sink = consume(po, "in")
    po.run_dispatch()
    txn = txns.declare()
    txn.acquire(sink.got[0], settled=True)
    hold_send(po, txn, "out", "x", durable=True)
    journal.fail_next = OSError("disk full")
    done = Discharge()
    txn.commit(po, done)
    assert isinstance(done.calls[0], OSError)
    assert po.queues["out"].message_count == 0
    q = po.queues["in"]
    assert (q.acked, q.message_count) == (0, 1)
    c.credit = 1
    po.run_dispatch()
    assert bodies(sink.got) == ["a", "a"]


# -- rollback-only and the registry ---------------------------------------------------------------
def test_commit_of_a_rollback_only_transaction_reports_the_recorded_cause(po, txns):
    txn = txns.declare()
    hold_send(po, txn, "out", "x")
    cause = errors.ResourceLimitExceeded("Address is full: out")
    txn.mark_rollback_only(cause)
    txn.mark_rollback_only(errors.IllegalState("a later one"))
    done = Discharge()
    txn.commit(po, done)
    assert done.calls == [cause]
    assert po.queues["out"].message_count == 0


def test_declared_transactions_have_distinct_ids_and_are_discharged_once(txns):
    a, b = txns.declare(owner="link-1"), txns.declare(owner="link-2")
    assert a.id != b.id
    assert txns.find(a.id) is a
    assert txns.owned_by("link-2") == [b]
    assert txns.discharge(a.id) is a
    with pytest.raises(UnknownTransaction):
        txns.discharge(a.id)
    with pytest.raises(errors.IllegalState):
        txns.discharge(b"never declared")
    assert txns.find(None) is None


# -- held sends count against the limits; the timeout -------------------------------------------
def held_bytes(po: PostOffice, address: str) -> tuple[int, int]:
    return po.addresses[address].size, po.flow.memory_used


def test_held_sends_count_against_their_address_until_commit(po):
    txn = Transactions().declare(postoffice=po)
    hold_send(po, txn, "out", "abc")
    hold_send(po, txn, "out", "defg")
    size = sum(m.size for m, _ in txn.sends)
    assert size > 0 and held_bytes(po, "out") == (size, size)
    done = Discharge()
    txn.commit(po, done)
    assert done.calls == [None]
    # Now counted by the queue, not twice; the memory limit also counts each ref's overhead.
    assert held_bytes(po, "out") == (size, size + 2 * po.flow.ref_overhead)
    assert po.queues["out"].message_count == 2


def test_rollback_gives_back_what_held_sends_counted(po):
    txn = Transactions().declare(postoffice=po)
    hold_send(po, txn, "out", "abc")
    assert held_bytes(po, "out")[0] > 0
    txn.rollback()
    assert held_bytes(po, "out") == (0, 0)


def test_a_failed_commit_gives_back_what_held_sends_counted(po, journal):
    txn = Transactions().declare(postoffice=po)
    hold_send(po, txn, "out", "abc", durable=True)
    journal.fail_next = RuntimeError("disk full")
    done = Discharge()
    txn.commit(po, done)
    assert [type(e) for e in done.calls] == [RuntimeError]
    assert held_bytes(po, "out") == (0, 0)


def test_a_timed_out_transaction_is_rolled_back_and_named_in_the_answer(po, txns):
    c, sink = consume(po, "in", credit=1)
    send(po, "in", "a")
    txn = txns.declare()
    txn.acquire(sink.got[0], settled=True)
    hold_send(po, txn, "out", "never")
    assert txns.time_out(txn) is True
    assert txns.time_out(txn) is False  # once
    assert txns.find(txn.id) is None
    assert po.queues["in"].message_count == 1  # the acquisition went back
    assert po.queues["out"].message_count == 0
    with pytest.raises(TransactionTimedOut, match="timed out"):
        txns.discharge(txn.id)
    assert isinstance(txns.missing(b"never declared"), UnknownTransaction)
    assert not isinstance(txns.missing(b"never declared"), TransactionTimedOut)


def test_a_discharged_transaction_cannot_time_out(txns):
    txn = txns.declare()
    txns.discharge(txn.id)
    assert txns.time_out(txn) is False
    assert not isinstance(txns.missing(txn.id), TransactionTimedOut)
