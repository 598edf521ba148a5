"""Reading the store back: everything at start (`recover`) and one page of a queue later.

Both return references in queue order, which is ascending message id: the broker assigns ids in
arrival order, and the primary key of `message_refs` (queue_id, message_id) serves the order
without a sort.
"""
from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, func, select

from hermod.broker.core.flow import REF_OVERHEAD_BYTES
from hermod.broker.core.ports import AddressRecord, MessageRecord, QueueRecord, Recovered, StoredReference

from . import integrity, prepared
from .engine import display_url
from .models import (acknowledgements, addresses, dead_letters, duplicate_ids, message_refs,
                     messages, prepared_transactions, queues, retained_messages)

log = logging.getLogger(__name__)

_MESSAGE_COLUMNS = (
    messages.c.id, messages.c.address, messages.c.encoded, messages.c.routing_type,
    messages.c.priority, messages.c.expiration, messages.c.scheduled_time, messages.c.arrival,
)


def recover(engine: Engine, *, window: int | None = None,
            max_bytes: int | None = None, only: frozenset[str] | None = None) -> Recovered:
    """Addresses, queues and each queue's references in order; `next_message_id` after the
    highest stored message id. With `window`, at most that many references per queue are
    returned, and with `max_bytes` at most about that many bytes of messages (with each
    reference's overhead) in all, shared evenly by the queues; the rest stays in the store for
    `read_page` (those queues are in `Recovered.more`). With `only`, the references of only
    those queues are read (a cluster node recovers the queues it owns; the others' definitions
    are still returned, so that it can route to them and redirect their consumers). First the
    store's integrity is restored (store.integrity.sweep), in a transaction of its own."""
    with engine.begin() as connection:
        swept = integrity.sweep(connection)
    if swept:
        log.warning("store %s: recovery removed %d references to a missing queue or message and"
                    " %d messages without a reference", display_url(engine.url), swept.refs,
                    swept.messages)
    with engine.connect() as connection:
        address_records = [address_record(row) for row in
                           connection.execute(select(addresses).order_by(addresses.c.name))]
        queue_rows = list(connection.execute(select(queues).order_by(queues.c.id)))
        queue_records = [queue_record(row) for row in queue_rows]
        references: dict[str, list[StoredReference]] = {}
        more: set[str] = set()
        read = [row for row in queue_rows if only is None or row.name in only]
        share = None if max_bytes is None else max(0, max_bytes // max(1, len(read)))
        for row in read:
            refs = references[row.name] = _references(connection, row.id, 0, window, share)
            if (window is not None and len(refs) >= window) or (
                    share is not None and _has_more(connection, row.id, refs)):
                more.add(row.name)
        highest = highest_message_id(connection)
        remembered: dict[str, list[str]] = {}
        for row in connection.execute(select(duplicate_ids).order_by(duplicate_ids.c.seq)):
            remembered.setdefault(row.address, []).append(row.duplicate_id)
        branches = prepared.load(connection)
    return Recovered(
        addresses=address_records,
        queues=queue_records,
        references=references,
        next_message_id=(highest or 0) + 1,
        duplicate_ids=remembered,
        more=frozenset(more),
        prepared=branches,
    )


def highest_message_id(connection: Connection) -> int:
    """The highest message id the store names anywhere (0 if none): ids must not repeat after a
    restart while records still name them (retention, acknowledgements, dead letters)."""
    return max((connection.execute(select(func.max(column))).scalar() or 0) for column in (
        messages.c.id, retained_messages.c.message_id, acknowledgements.c.message_id,
        dead_letters.c.message_id, prepared_transactions.c.highest_message_id))


def definitions(engine: Engine, names: list[str]) -> tuple[list[AddressRecord], list[QueueRecord]]:
    """The stored definitions of the queues `names` and of their addresses (a cluster node that
    takes queues over may not know them yet: another node created them after it started)."""
    with engine.connect() as connection:
        queue_records = [queue_record(row) for row in connection.execute(
            select(queues).where(queues.c.name.in_(names)).order_by(queues.c.id))]
        wanted = sorted({q.address for q in queue_records})
        address_records = [address_record(row) for row in connection.execute(
            select(addresses).where(addresses.c.name.in_(wanted)))]
    return address_records, queue_records


def address_record(row) -> AddressRecord:
    return AddressRecord(
        name=row.name,
        routing_types=frozenset(
            kind for kind, on in (("anycast", row.anycast), ("multicast", row.multicast)) if on),
        auto_created=row.auto_created,
    )


def read_page(connection: Connection, queue_id: int, after_message_id: int,
              limit: int) -> list[StoredReference]:
    return _references(connection, queue_id, after_message_id, limit)


def queue_record(row) -> QueueRecord:
    return QueueRecord(
        name=row.name,
        address=row.address,
        routing_type=row.routing_type,
        filter=row.filter,
        max_consumers=row.max_consumers,
        exclusive=row.exclusive,
        last_value_key=row.last_value_key,
        auto_created=row.auto_created,
        purpose=row.purpose,
        extra=dict(row.extra or {}),
    )


def _has_more(connection: Connection, queue_id: int, refs: list[StoredReference]) -> bool:
    after = refs[-1].message.id if refs else 0
    return connection.execute(
        select(message_refs.c.message_id)
        .where(message_refs.c.queue_id == queue_id, message_refs.c.message_id > after)
        .limit(1)).first() is not None


def _references(connection: Connection, queue_id: int, after: int,
                limit: int | None, max_bytes: int | None = None) -> list[StoredReference]:
    query = (
        select(message_refs.c.delivery_count, *_MESSAGE_COLUMNS)
        .join(messages, messages.c.id == message_refs.c.message_id)
        .where(message_refs.c.queue_id == queue_id, message_refs.c.message_id > after)
        .order_by(message_refs.c.message_id)
    )
    if limit is not None:
        query = query.limit(limit)
    if max_bytes is not None:
        return _within(connection.execute(query), max_bytes)
    return [_stored(row) for row in connection.execute(query)]


def _stored(row) -> StoredReference:
    return StoredReference(
        message=MessageRecord(
            id=row.id,
            address=row.address,
            encoded=bytes(row.encoded),
            routing_type=row.routing_type,
            priority=row.priority,
            expiration=row.expiration,
            scheduled_time=row.scheduled_time,
            arrival=row.arrival,
        ),
        delivery_count=row.delivery_count,
    )


def _within(rows, max_bytes: int) -> list[StoredReference]:
    """References from `rows` while their messages (with each one's overhead) fit in
    `max_bytes`: the rows are streamed, the rest never read."""
    out: list[StoredReference] = []
    used = 0
    for row in rows:
        used += len(row.encoded) + REF_OVERHEAD_BYTES
        if used > max_bytes:
            break
        out.append(_stored(row))
    return out
