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
                 "_held", "_postoffice")

    def __init__(self, txn_id: bytes, owner: object = None, postoffice: PostOffice | None = None):
        self.id = txn_id
        self.owner = owner  # whoever declared it (the adapter's coordinator link)
        self.sends: Plan = []
        self._held: dict = {}  # Address -> bytes of held sends counted against it
        self._postoffice = postoffice  # None: held sends are not counted (core tests)
        self.declared_at = 0.0  # the adapter's clock, for the transaction timeout
        self.acquired: list[Acquisition] = []
        self.rollback_cause: BaseException | None = None
        self.state = Transaction.ACTIVE

    # -- work done inside the transaction -------------------------------------------------------
    def add_send(self, plan: Plan) -> None:
        """Hold a routed message until commit; its bytes count against the addresses of its
        queues (flow control) until then."""
        self.sends.extend(plan)
        postoffice = self._postoffice
        if postoffice is None:
            return
        held = self._held
        for message, queues in plan:
            for q in queues:
                address = q.address
                held[address] = held.get(address, 0) + message.size
                postoffice.flow.account(address, message.size)

    def _release_held(self) -> None:
        """Held sends stop counting: posted at commit (the queues count them), or dropped."""
        held, self._held = self._held, {}
        po = self._postoffice
        if po is not None:
            for address, size in held.items():
                po.flow.account(address, -size)

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
        self._release_held()
        if self.rollback_cause is not None:
            self.rollback()
            done(self.rollback_cause)
            return
        # Queues deleted since the messages were routed take nothing (their rows are gone).
        plan = [(message, [q for q in queues if not q.deleted]) for message, queues in self.sends]
        acks = [a for a in self.acquired if not a.ref.queue.deleted]
        ops: list[ports.Operation] = [ports.DeleteReference(a.ref.queue.name, a.ref.message.id)
                                      for a in acks if a.ref.durable]

        def committed(error: BaseException | None) -> None:
            if error is not None:
                self.rollback()
                done(error)
                return
            for a in acks:
                ref = a.ref
                if ref.queue.deleted:
                    continue  # deleted while the unit was written: already gone
                ref.durable = False  # its stored reference went with this unit
                ref.queue.acknowledge(ref)
            self.sends = []
            self.state = Transaction.DONE
            done(None)

        postoffice.post(plan, committed, ops)

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
        self.state = Transaction.DONE


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


__all__ = ["Acquisition", "Transaction", "TransactionTimedOut", "Transactions",
           "UnknownTransaction"]
