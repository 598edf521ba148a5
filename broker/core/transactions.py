"""Local transactions: sends and acknowledgements held back until the client discharges.

A `Transaction` collects two kinds of work while it is open:

- sends: routing plans (`PostOffice.route()` results), decided when the message arrives but
  put on no queue;
- acquisitions: messages a consumer accepted inside the transaction. The transaction takes the
  message from the consumer (so a consumer that leaves does not give it back to the queue) and
  acknowledges it at commit.

Commit is one journal unit: every durable message of every plan, its references, and the
deletion of every acknowledged durable reference go through a single `PostOffice.post(plan,
done, extra_ops)`. Only when the store confirms are the messages put on their queues and the
acknowledgements applied in memory; if it fails, nothing happened and the transaction rolls back.

Rollback drops the sends and returns the acquisitions (Artemis): a message whose delivery the
client had already settled goes back to its queue, counted as a failed attempt; one still
unsettled stays with its consumer, its delivery count raised, for the client to settle again.

A transaction can be marked rollback-only (a presettled send that failed inside it): commit then
rolls back and reports the recorded cause. The core knows no AMQP: ids are opaque bytes and the
adapter's delivery handles are opaque objects.

Held sends count against their addresses' `max_size_bytes` and the broker's memory limit from
the moment they arrive (as in Artemis, where a transactional send is routed and paged at once),
so a long transaction cannot grow the broker without bound; the count moves to the queues at
commit and goes at rollback. A transaction still open after the transaction timeout (Artemis's
`transaction-timeout`, 300 s by default) is rolled back by the broker; a later discharge or send
naming it learns that it timed out.

Prepared (XA) transactions: `prepare` writes the branch to the store as one record (its durable
held sends with their durable queues, and its acknowledged durable references, which stay
stored on their queues); from then on it is no longer active (no timeout applies) and is kept
until the commit, which stores its messages, deletes its acknowledged references and forgets
the record in one unit, or the rollback, which forgets the record. `restore` rebuilds a prepared
branch from its record at broker start: its acknowledged messages are taken off their queues
again, so no other consumer sees them while the branch is in doubt.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable

from . import ports
from .errors import IllegalState

if TYPE_CHECKING:
    from .postoffice import Plan, PostOffice
    from .queue import Consumer, Ref

Done = Callable[[BaseException | None], None]


TIMED_OUT_REMEMBERED = 1000  # ids kept per client to answer a late discharge


class UnknownTransaction(IllegalState):
    """A transaction id that was never declared here, or is already discharged."""


class TransactionTimedOut(UnknownTransaction):
    """The broker rolled the transaction back: it was open longer than the transaction timeout."""


class Acquisition:
    """A message a consumer accepted inside a transaction."""

    __slots__ = ("ref", "consumer", "handle", "settled", "kept")

    def __init__(self, ref: Ref, handle: object, settled: bool):
        self.ref = ref
        self.consumer: Consumer | None = ref.consumer
        self.handle = handle  # the adapter's delivery, opaque here
        self.settled = settled  # the client settled its delivery already
        self.kept = False  # after rollback: still with its consumer (else back on the queue)


class Transaction:
    ACTIVE, DISCHARGING, DONE = "active", "discharging", "done"

    __slots__ = ("id", "owner", "sends", "acquired", "rollback_cause", "state", "declared_at",
                 "xid", "_held", "_waiting", "_restored", "_unread", "_postoffice")

    def __init__(self, txn_id: bytes, owner: object = None, postoffice: PostOffice | None = None):
        self.id = txn_id
        self.owner = owner  # whoever declared it (the adapter's coordinator link)
        self.sends: Plan = []
        self._held: dict = {}  # Address -> bytes of held sends counted against it
        self._waiting: list = []  # a Queue per held copy: no auto-delete while it waits for one
        # A Queue per acquisition `restore` made: out with no consumer, so the queue would look
        # idle (auto-delete) while the branch is in doubt.
        self._restored: list = []
        # Acknowledged references `restore` found in no queue's memory (beyond the recovery
        # window): (queue, message id), deleted by the commit all the same; those paging reads
        # before the decision become acquisitions (`Queue.in_doubt`).
        self._unread: list = []
        self._postoffice = postoffice  # None: held sends are not counted (core tests)
        self.declared_at = 0.0  # the adapter's clock, for the transaction timeout
        self.acquired: list[Acquisition] = []
        self.rollback_cause: BaseException | None = None
        self.state = Transaction.ACTIVE
        self.xid: bytes | None = None  # prepared and stored under this id (`prepare`)

    # -- work done inside the transaction -------------------------------------------------------
    def add_send(self, plan: Plan) -> None:
        """Hold a routed message until commit; its bytes count against the addresses of its
        queues (flow control) until then."""
        self.sends.extend(plan)
        postoffice = self._postoffice
        if postoffice is None:
            return
        held = self._held
        waiting = self._waiting
        for message, queues in plan:
            for q in queues:
                q.pending += 1
                waiting.append(q)
                address = q.address
                held[address] = held.get(address, 0) + message.size
                postoffice.flow.account(address, message.size)

    def _release_held(self) -> None:
        """Held sends stop counting: posted at commit (the queues count them), or dropped."""
        held, self._held = self._held, {}
        waiting, self._waiting = self._waiting, []
        po = self._postoffice
        if po is not None:
            for address, size in held.items():
                po.flow.account(address, -size)
            for q in waiting:
                q.pending -= 1
            for q in set(waiting):
                if not q.pending and q.idle:
                    po.queue_idle_check(q)

    def _release_restored(self) -> None:
        unread, self._unread = self._unread, []
        for q, message_id in unread:  # decided: paging hands these to consumers as usual
            if q.in_doubt is not None:
                q.in_doubt.pop(message_id, None)
        restored, self._restored = self._restored, []
        for q in restored:
            q.pending -= 1
        if self._postoffice is not None:
            for q in set(restored):
                if not q.pending and q.idle:
                    self._postoffice.queue_idle_check(q)

    def _take_restored(self, ref: Ref) -> None:
        """An acknowledged ref of a restored branch, off its queue (`restore`, or paging)."""
        self.acquire(ref, None, settled=True)
        ref.queue.pending += 1
        self._restored.append(ref.queue)
        self._unread = [(q, m) for q, m in self._unread if not (q is ref.queue and m == ref.message.id)]

    def acquire(self, ref: Ref, handle: object = None, settled: bool = False) -> Acquisition:
        """The consumer accepted `ref` in this transaction: it is acknowledged at commit. The
        transaction takes it out of the consumer's in-flight set, so a consumer that detaches
        before the discharge does not put it back on the queue."""
        acquisition = Acquisition(ref, handle, settled)
        if acquisition.consumer is not None:
            acquisition.consumer.in_flight.pop(ref, None)
        self.acquired.append(acquisition)
        return acquisition

    def mark_rollback_only(self, cause: BaseException) -> None:
        """Commit will fail with `cause` (the first one recorded)."""
        if self.rollback_cause is None:
            self.rollback_cause = cause

    # -- discharge -----------------------------------------------------------------------------
    def commit(self, postoffice: PostOffice, done: Done) -> None:
        """Post every held send and apply every acknowledgement as one journal unit;
        `done(None)` once committed, `done(error)` after rolling back instead."""
        self.state = Transaction.DISCHARGING
        if self.rollback_cause is not None:
            self.rollback()
            done(self.rollback_cause)
            return
        # Queues deleted since the messages were routed take nothing (their rows are gone).
        plan = [(message, [q for q in queues if not q.deleted]) for message, queues in self.sends]
        acks = [a for a in self.acquired if not a.ref.queue.deleted]
        ops: list[ports.Operation] = [ports.DeleteReference(a.ref.queue.name, a.ref.message.id)
                                      for a in acks if a.ref.durable]
        unread = [(q, m) for q, m in self._unread if not q.deleted]
        ops.extend(ports.DeleteReference(q.name, m) for q, m in unread)
        if self.xid is not None:
            ops.append(ports.ForgetTransaction(self.xid))

        def committed(error: BaseException | None) -> None:
            if error is not None:
                if self.xid is not None and postoffice.journal.durable:
                    self.state = Transaction.ACTIVE  # still prepared in the store: stays in doubt
                else:
                    self.rollback()
                done(error)
                return
            for a in acks:
                ref = a.ref
                if ref.queue.deleted:
                    continue  # deleted while the unit was written: already gone
                ref.durable = False  # its stored reference went with this unit
                ref.queue.acknowledge(ref)
            self._release_restored()
            self.sends = []
            self.state = Transaction.DONE
            done(None)

        postoffice.post(plan, committed, ops)
        # After `post`, which counts the messages on their way to the queues: a queue never
        # looks idle (auto-delete) between the two.
        self._release_held()

    # -- two-phase (XA) --------------------------------------------------------------------------
    def prepared_record(self, xid: bytes) -> ports.PreparedRecord:
        """What the store keeps of this branch: durable messages on durable queues, and the
        acknowledged durable references (the rest is gone with a restart, as it would be
        without a transaction)."""
        sends = []
        for message, queues in self.sends:
            names = tuple(q.name for q in queues if not q.deleted and q.stores and message.durable)
            if names:
                if not message.id:
                    message.id = self._postoffice_for_ids().next_message_id()
                sends.append((self._postoffice_for_ids().message_record(message), names))
        acks = tuple((a.ref.queue.name, a.ref.message.id) for a in self.acquired
                     if a.ref.durable and not a.ref.queue.deleted)
        return ports.PreparedRecord(xid, tuple(sends), acks)

    def _postoffice_for_ids(self) -> PostOffice:
        assert self._postoffice is not None, "a prepared transaction is declared with its post office"
        return self._postoffice

    def prepare(self, xid: bytes, done: Done) -> None:
        """Store the branch (`done(None)` once stored; `done(error)`: nothing stored, and the
        branch is still as it was, for the caller to roll back)."""
        postoffice = self._postoffice_for_ids()
        journal = postoffice.journal
        if not journal.durable:
            self.xid = xid
            done(None)
            return
        record = self.prepared_record(xid)

        def stored(error: BaseException | None) -> None:
            if error is None:
                self.xid = xid
            done(error)

        journal.submit([ports.PrepareTransaction(record)], stored)

    def abort(self, done: Done) -> None:
        """Roll back a prepared branch: its record goes from the store first, then `rollback`;
        `done(error)` if the store could not forget it (the branch stays prepared)."""
        xid = self.xid
        if xid is None or self._postoffice is None or not self._postoffice.journal.durable:
            self.rollback()
            done(None)
            return

        def forgotten(error: BaseException | None) -> None:
            if error is None:
                self.rollback()
            done(error)

        self._postoffice.journal.submit([ports.ForgetTransaction(xid)], forgotten)

    def rollback(self) -> None:
        """Drop the held sends; return every acquired message (see the module docstring)."""
        self.sends = []
        self._release_held()
        for a in self.acquired:
            ref = a.ref
            queue = ref.queue
            if queue.deleted:
                continue
            c = a.consumer
            if not a.settled and c is not None and c in queue.consumers:
                ref.delivery_count += 1
                c.in_flight[ref] = None
                a.kept = True
            else:
                queue.release(ref, failed=True)
        self._release_restored()
        self.state = Transaction.DONE


def restore(postoffice: PostOffice, record: ports.PreparedRecord) -> Transaction:
    """A prepared branch read back at start (after `PostOffice.recover`): its sends held again
    for their queues (those still there), its acknowledged messages taken off their queues
    (invisible to consumers until the branch is decided). One recovery did not read (beyond its
    window) is taken when paging reads it, and the commit deletes it all the same."""
    txn = Transaction(b"prepared:" + record.xid, None, postoffice)
    make = postoffice.message_from_record
    assert make is not None, "PostOffice.recover() runs before restore()"
    for message_record, names in record.sends:
        queues = [postoffice.queues[n] for n in names if n in postoffice.queues]
        txn.add_send([(make(message_record), queues)])
    wanted: dict[str, set[int]] = {}
    for queue_name, message_id in record.acks:
        wanted.setdefault(queue_name, set()).add(message_id)
    for queue_name, ids in wanted.items():
        queue = postoffice.queues.get(queue_name)
        if queue is None:
            continue
        for ref in queue.waiting():
            if ref.message.id in ids and queue.take_back_waiting(ref):
                ids.discard(ref.message.id)
                txn._take_restored(ref)
        if ids and queue.paged:
            if queue.in_doubt is None:
                queue.in_doubt = {}
            for message_id in ids:
                queue.in_doubt[message_id] = txn._take_restored
                txn._unread.append((queue, message_id))
    txn.xid = record.xid
    return txn


class Transactions:
    """The open transactions of one client (its connection), by id."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.active: dict[bytes, Transaction] = {}
        self.timed_out: OrderedDict[bytes, None] = OrderedDict()  # the newest ids rolled back

    def declare(self, owner: object = None, postoffice: PostOffice | None = None) -> Transaction:
        txn = Transaction(b"txn:%d" % next(self._ids), owner, postoffice)
        self.active[txn.id] = txn
        return txn

    def find(self, txn_id: bytes | None) -> Transaction | None:
        return self.active.get(txn_id) if txn_id is not None else None

    def missing(self, txn_id: bytes | None) -> UnknownTransaction:
        """Why `txn_id` names no open transaction."""
        if txn_id in self.timed_out:
            return TransactionTimedOut(f"transaction {txn_id!r} timed out and was rolled back")
        return UnknownTransaction(f"unknown transaction {txn_id!r}")

    def discharge(self, txn_id: bytes | None) -> Transaction:
        """Take a transaction out for commit or rollback; UnknownTransaction (or
        TransactionTimedOut) if there is none."""
        txn = self.active.pop(txn_id, None) if txn_id is not None else None
        if txn is None:
            raise self.missing(txn_id)
        return txn

    def time_out(self, txn: Transaction) -> bool:
        """Roll back `txn` if it is still open; remember its id for a late discharge."""
        if self.active.get(txn.id) is not txn:
            return False
        del self.active[txn.id]
        txn.rollback()
        self.timed_out[txn.id] = None
        if len(self.timed_out) > TIMED_OUT_REMEMBERED:
            self.timed_out.popitem(last=False)
        return True

    def owned_by(self, owner: object) -> list[Transaction]:
        return [t for t in self.active.values() if t.owner is owner]


__all__ = ["Acquisition", "Transaction", "restore", "TransactionTimedOut", "Transactions",
           "UnknownTransaction"]
