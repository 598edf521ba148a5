"""Applying units of work to the database inside one transaction, with batched statements.

Theory of operation. A group commit holds hundreds of units, typically "AddMessage,
AddReference" from producers and "DeleteReference" from consumers. Executing them op by op would
cost one round trip each, so message inserts, reference inserts, delivery-count updates and
reference deletes are buffered and sent in one go each, in that fixed order, when the batch
ends. The fixed order gives the same result as applying the ops one by one because:

- a reference is inserted after its message and deleted after every insert;
- a message whose last reference goes is deleted at the end of that unit, not at the delete
  itself, so a move (delete on one queue, add on another, in one unit, either order) keeps it;
- an op that would see a different result under the fixed order (adding a reference whose
  delete or count update is already buffered, or to a message an earlier unit left without
  references) first flushes the buffers, as does every operation on addresses and queues
  (rare), which then runs on its own in sequence. DeleteQueue removes the messages only that
  queue held at that point of its unit.

Deletes are idempotent, and so are inserts when asked (ON CONFLICT DO NOTHING), so replaying a
batch whose commit outcome was lost with the connection does no harm; the journal asks for that
only on a replay, since PostgreSQL pays for it on every row (`SqlJournal._commit`).

Each buffer goes to the database as ONE statement per chunk of rows (store.bulk), not as an
executemany: sqlite3 gives the GIL up and must win it back from the busy reactor thread once per
row of an executemany, which held Q1D on SQLite at ~15k msg/s with the writer thread saturated;
multi-row statements (SQLite) and column arrays with `unnest` (PostgreSQL) take one round per
chunk (figures in store.bulk). Delivery counts are kept one per key (the last one set wins, as it would op by op).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from hermod.broker.core.ports import (
    AddMessage,
    AddReference,
    DeleteAddress,
    DeleteQueue,
    DeleteReference,
    ForgetTransaction,
    Operation,
    PrepareTransaction,
    PutAddress,
    PutQueue,
    RecordAcknowledged,
    RecordDeadLetter,
    RememberDuplicateId,
    RetainMessage,
    SetDeliveryCount,
)

from . import bulk, integrity, prepared
from .errors import StoreError, UnknownMessage, UnknownQueue
from .models import acknowledgements, addresses, dead_letters, duplicate_ids, queues, retained_messages

_DELETED = -1  # a queue removed in the current transaction


@dataclass(slots=True)
class _Buffers:
    # Rows as tuples in the order store.bulk takes them.
    messages: list[tuple] = field(default_factory=list)
    refs: list[tuple] = field(default_factory=list)
    counts: dict[tuple[int, int], int] = field(default_factory=dict)  # (queue, message) -> count
    deletes: dict[tuple[int, int], None] = field(default_factory=dict)  # an ordered set of keys
    # Messages that lost a reference: in the current unit / in units already ended. Only the
    # latter are checked for "no reference left" (ordered sets).
    unit_orphans: dict[int, None] = field(default_factory=dict)
    orphans: dict[int, None] = field(default_factory=dict)
    # Messages inserted by this buffer; references to any other message are checked against
    # the table at the flush (no foreign key does it, store.integrity).
    added: set[int] = field(default_factory=set)
    unchecked: dict[int, None] = field(default_factory=dict)
    # Records that nothing else in a unit depends on: appended, written in one go.
    retained: list[dict] = field(default_factory=list)
    acks: list[dict] = field(default_factory=list)
    dead: list[dict] = field(default_factory=list)
    duplicates: dict[tuple[str, str], dict] = field(default_factory=dict)
    keep: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.messages or self.refs or self.counts or self.deletes or self.orphans
                    or self.retained or self.acks or self.dead or self.duplicates)


class Applier:
    """Owned by the writer thread. Caches queue name -> id (committed state only)."""

    def __init__(self, dialect: str) -> None:
        self._bulk = bulk.for_dialect(dialect)
        self._queue_ids: dict[str, int] = {}
        self._idempotent = True  # of the current `apply`
        self._txn_queue_ids: dict[str, int] = {}
        # Order of duplicate ids across restarts: nanoseconds at start, then one step per id.
        self._seq = time.time_ns()

    # -- transaction bookkeeping ---------------------------------------------------------------

    def committed(self) -> None:
        for name, queue_id in self._txn_queue_ids.items():
            if queue_id == _DELETED:
                self._queue_ids.pop(name, None)
            else:
                self._queue_ids[name] = queue_id
        self._txn_queue_ids.clear()

    def rolled_back(self) -> None:
        self._txn_queue_ids.clear()

    def forget(self) -> None:
        """Drop the cache (after a lost connection nothing cached is trusted)."""
        self._queue_ids.clear()
        self._txn_queue_ids.clear()

    # -- applying ------------------------------------------------------------------------------

    def apply(self, connection: Connection, units: Iterable[Sequence[Operation]],
              idempotent: bool = True, commit: bool = False) -> int:
        """Apply the units' ops in the caller's transaction; returns the number of ops.
        `idempotent` False: message and reference inserts fail on a row already stored
        (cheaper on PostgreSQL; the journal replays with True, see `SqlJournal._commit`).
        `commit`: the caller has nothing to run after the ops and commits next, so the last
        statements may commit the transaction themselves (store.bulk.PostgresBulk.write: one
        round trip fewer); the caller's commit then finds it ended, which is a no-op."""
        self._idempotent = idempotent
        buffers = _Buffers()
        count = 0
        for ops in units:
            for op in ops:
                count += 1
                self._buffer(connection, buffers, op)
            if buffers.unit_orphans:
                buffers.orphans.update(buffers.unit_orphans)
                buffers.unit_orphans.clear()
        self._flush(connection, buffers, commit)
        return count

    def _buffer(self, connection: Connection, b: _Buffers, op: Operation) -> None:
        if isinstance(op, AddMessage):
            m = op.message
            if m.id in b.orphans:
                self._flush(connection, b)
            elif m.id in b.added:
                return  # already in this buffer (a message is stored once)
            b.messages.append((m.id, m.address, m.encoded, m.routing_type, m.priority,
                               m.expiration, m.scheduled_time, m.arrival))
            b.added.add(m.id)
        elif isinstance(op, AddReference):
            queue_id = self._queue_id(connection, op.queue)
            if queue_id is None:
                raise UnknownQueue(f"no queue {op.queue!r} in the store for message {op.message_id}")
            key = (queue_id, op.message_id)
            if key in b.deletes or key in b.counts or op.message_id in b.orphans:
                self._flush(connection, b)
            b.refs.append((queue_id, op.message_id, op.delivery_count))
            if op.message_id not in b.added:
                b.unchecked[op.message_id] = None
        elif isinstance(op, DeleteReference):
            queue_id = self._queue_id(connection, op.queue)
            if queue_id is not None:  # an ack after its queue was deleted: nothing left to do
                b.deletes[(queue_id, op.message_id)] = None
                b.unit_orphans[op.message_id] = None
        elif isinstance(op, RetainMessage):
            m = op.message
            b.retained.append({"message_id": m.id, "address": m.address, "routing_type": m.routing_type,
                               "priority": m.priority, "arrival": m.arrival, "encoded": m.encoded})
        elif isinstance(op, RecordAcknowledged):
            b.acks.append({"message_id": op.message_id, "queue": op.queue, "at": op.at})
        elif isinstance(op, RecordDeadLetter):
            b.dead.append({"message_id": op.message_id, "original_address": op.original_address,
                           "queue": op.queue, "reason": op.reason, "at": op.at})
        elif isinstance(op, RememberDuplicateId):
            self._seq += 1
            b.duplicates[(op.address, op.duplicate_id)] = {
                "address": op.address, "duplicate_id": op.duplicate_id, "seq": self._seq}
            b.keep[op.address] = op.keep
        elif isinstance(op, SetDeliveryCount):
            queue_id = self._queue_id(connection, op.queue)
            if queue_id is not None:
                b.counts[(queue_id, op.message_id)] = op.delivery_count
        else:
            self._flush(connection, b)
            self._structural(connection, op)

    def _flush(self, connection: Connection, b: _Buffers, commit: bool = False) -> None:
        if not b:
            return
        if b.unchecked:
            # References to messages stored before this buffer (never to one of its own
            # inserts, `added`), so checked before them.
            missing = integrity.missing_messages(connection, list(b.unchecked))
            if missing:
                raise UnknownMessage(f"no message {missing[0]} in the store for a reference"
                                     f" ({len(missing)} missing)")
        rest = b.retained or b.acks or b.dead or b.duplicates
        if b.messages or b.refs or b.counts or b.deletes or b.orphans:
            self._bulk.write(connection, b.messages, b.refs,
                             [(q, m, n) for (q, m), n in b.counts.items()], list(b.deletes),
                             list(b.orphans), self._idempotent, commit and not rest)
        if b.retained:
            connection.execute(insert(retained_messages), b.retained)
        if b.acks:
            connection.execute(insert(acknowledgements), b.acks)
        if b.dead:
            connection.execute(insert(dead_letters), b.dead)
        if b.duplicates:
            rows = list(b.duplicates.values())
            connection.execute(delete(duplicate_ids).where(
                duplicate_ids.c.address == bindparam("a"), duplicate_ids.c.duplicate_id == bindparam("d")),
                [{"a": r["address"], "d": r["duplicate_id"]} for r in rows])
            connection.execute(insert(duplicate_ids), rows)
            for address, keep in b.keep.items():
                self._prune_duplicates(connection, address, keep)
        b.retained, b.acks, b.dead = [], [], []
        b.duplicates.clear()
        b.keep.clear()
        b.messages, b.refs = [], []
        b.added.clear()
        b.unchecked.clear()
        b.counts.clear()
        b.deletes.clear()
        b.orphans.clear()

    @staticmethod
    def _prune_duplicates(connection: Connection, address: str, keep: int) -> None:
        """Keep the newest `keep` duplicate ids of an address."""
        c = duplicate_ids.c
        cutoff = connection.execute(
            select(c.seq).where(c.address == address).order_by(c.seq.desc()).offset(keep).limit(1)
        ).scalar()
        if cutoff is not None:
            connection.execute(delete(duplicate_ids).where(c.address == address, c.seq <= cutoff))

    def _structural(self, connection: Connection, op: Operation) -> None:
        if isinstance(op, PutAddress):
            a = op.address
            values: dict[str, object] = {"anycast": "anycast" in a.routing_types,
                                         "multicast": "multicast" in a.routing_types,
                                         "auto_created": a.auto_created}
            changed = connection.execute(
                update(addresses).where(addresses.c.name == a.name).values(**values)).rowcount
            if not changed:
                connection.execute(insert(addresses).values(name=a.name, **values))
        elif isinstance(op, DeleteAddress):
            connection.execute(delete(addresses).where(addresses.c.name == op.name))
        elif isinstance(op, PutQueue):
            q = op.queue
            values = {"address": q.address, "routing_type": q.routing_type, "filter": q.filter,
                      "max_consumers": q.max_consumers, "exclusive": q.exclusive,
                      "last_value_key": q.last_value_key, "auto_created": q.auto_created,
                      "purpose": q.purpose, "extra": dict(q.extra)}
            queue_id = self._queue_id(connection, q.name)
            if queue_id is not None:
                connection.execute(update(queues).where(queues.c.id == queue_id).values(**values))
            else:
                queue_id = connection.execute(
                    insert(queues).values(name=q.name, **values).returning(queues.c.id)
                ).scalar_one()
                self._txn_queue_ids[q.name] = queue_id
        elif isinstance(op, DeleteQueue):
            queue_id = self._queue_id(connection, op.name)
            if queue_id is None:
                return
            # Its references, then the messages only it referenced (no foreign keys cascade).
            integrity.delete_queue_contents(connection, queue_id)
            connection.execute(delete(queues).where(queues.c.id == queue_id))
            self._txn_queue_ids[op.name] = _DELETED
        elif isinstance(op, PrepareTransaction):
            prepared.store(connection, op.branch)
        elif isinstance(op, ForgetTransaction):
            prepared.forget(connection, op.xid)
        else:
            raise StoreError(f"unknown store operation {type(op).__name__}")

    def queue_id(self, connection: Connection, name: str) -> int | None:
        """The id of a queue as this transaction sees it (None: no such queue)."""
        return self._queue_id(connection, name)

    def _queue_id(self, connection: Connection, name: str) -> int | None:
        queue_id = self._txn_queue_ids.get(name)
        if queue_id is None:
            queue_id = self._queue_ids.get(name)
        if queue_id is None:
            queue_id = connection.execute(
                select(queues.c.id).where(queues.c.name == name)).scalar()
            if queue_id is not None:
                # Not touched by this transaction, so this is committed state.
                self._queue_ids[name] = queue_id
        return None if queue_id == _DELETED else queue_id
