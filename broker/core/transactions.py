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
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Callable

from . import ports
from .errors import IllegalState

if TYPE_CHECKING:
    from .postoffice import Plan, PostOffice
    from .queue import Consumer, Ref

Done = Callable[[BaseException | None], None]


class UnknownTransaction(IllegalState):
    """A transaction id that was never declared here, or is already discharged."""


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

    __slots__ = ("id", "owner", "sends", "acquired", "rollback_cause", "state")

    def __init__(self, txn_id: bytes, owner: object = None):
        self.id = txn_id
        self.owner = owner  # whoever declared it (the adapter's coordinator link)
        self.sends: Plan = []
        self.acquired: list[Acquisition] = []
        self.rollback_cause: BaseException | None = None
        self.state = Transaction.ACTIVE

    @property
    def rollback_only(self) -> bool:
        return self.rollback_cause is not None

    # -- work done inside the transaction -------------------------------------------------------
    def add_send(self, plan: Plan) -> None:
        """Hold a routed message until commit."""
        self.sends.extend(plan)

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

    def __init__(self):
        self._ids = itertools.count(1)
        self.active: dict[bytes, Transaction] = {}

    def declare(self, owner: object = None) -> Transaction:
        txn = Transaction(b"txn:%d" % next(self._ids), owner)
        self.active[txn.id] = txn
        return txn

    def find(self, txn_id: bytes | None) -> Transaction | None:
        return self.active.get(txn_id) if txn_id is not None else None

    def discharge(self, txn_id: bytes | None) -> Transaction:
        """Take a transaction out for commit or rollback; UnknownTransaction if there is none."""
        txn = self.active.pop(txn_id, None) if txn_id is not None else None
        if txn is None:
            raise UnknownTransaction(f"unknown transaction {txn_id!r}")
        return txn

    def owned_by(self, owner: object) -> list[Transaction]:
        return [t for t in self.active.values() if t.owner is owner]


__all__ = ["Acquisition", "Transaction", "Transactions", "UnknownTransaction"]
