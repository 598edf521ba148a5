"""Every query on the retention tables: `retained_messages`, `acknowledgements`, `dead_letters`.

The broker writes these rows through the journal (`apply.py`); everything that reads or purges
them goes through here: the purge thread (`broker.retention`), `hermod replay`
(`broker.replay`) and the `hermod` Spark data source (`broker.spark.store_reader`). Callers pass
an engine and plain values and get plain tuples back, so none of them needs SQLAlchemy.

Theory of operation for partitioned reads. The driver counts the selected rows once and, for N
partitions, picks the ids at row positions 0, n/N, 2n/N ... (one window-function query), so every
partition holds about the same number of rows however sparse the ids of one address are.
Partition i reads ids in [boundary i, boundary i+1) with the same filters, the last one up to
the highest id the driver saw: the ranges tile the selection, so every row is read exactly once,
and rows that arrive while the job runs are not half-included. Ranges are over each table's own
row id; acknowledgement and dead-letter rows carry, as `id`, the retained message's row id (the
`id` of the `messages` table), found by the broker's message id.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

from sqlalchemy import ColumnElement, Engine, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from .errors import StoreError
from .models import acknowledgements, dead_letters, retained_messages

DAY_MS = 86_400_000
TABLES = ("messages", "acknowledgements", "dead_letters")
_TABLE = {"messages": retained_messages, "acknowledgements": acknowledgements,
          "dead_letters": dead_letters}


@dataclass(frozen=True)
class Selection:
    """Which rows of which table to read; picklable (Spark ships it to executors)."""

    url: str
    table: str = "messages"
    addresses: tuple[str, ...] | None = None  # None: every address
    from_ms: int | None = None
    to_ms: int | None = None


@dataclass(frozen=True)
class IdRange:
    first: int  # inclusive
    last: int  # inclusive


def _where(selection: Selection) -> list[ColumnElement[bool]]:
    """The selection's filters; acknowledgements are selected by their message's address."""
    table = _TABLE[selection.table]
    c = table.c
    clauses: list[ColumnElement[bool]] = []
    if selection.addresses is not None:
        if selection.table == "messages":
            clauses.append(c.address.in_(selection.addresses))
        elif selection.table == "dead_letters":
            clauses.append(c.original_address.in_(selection.addresses))
        else:
            r = retained_messages.c
            clauses.append(c.message_id.in_(select(r.message_id).where(r.address.in_(selection.addresses))))
    time_column = c.arrival if selection.table == "messages" else c.at
    if selection.from_ms is not None:
        clauses.append(time_column >= selection.from_ms)
    if selection.to_ms is not None:
        clauses.append(time_column < selection.to_ms)
    return clauses


def addresses(engine: Engine, table: str) -> list[str]:
    """Every address with rows in `table` (dead letters: their original address)."""
    column = dead_letters.c.original_address if table == "dead_letters" else retained_messages.c.address
    with engine.connect() as connection:
        return [row[0] for row in connection.execute(select(column).distinct())]


def plan(engine: Engine, selection: Selection, partitions: int | None,
         rows_per_partition: int) -> list[IdRange]:
    """Id ranges for `partitions` partitions (default one per `rows_per_partition` rows);
    exactly that many when there are at least that many rows, else one per row (never fewer
    than one)."""
    table = _TABLE[selection.table]
    where = _where(selection)
    with engine.connect() as connection:
        count, low, high = connection.execute(
            select(func.count(), func.min(table.c.id), func.max(table.c.id)).where(*where)).one()
        if not count:
            return [IdRange(1, 0)]
        wanted = partitions if partitions else math.ceil(count / rows_per_partition)
        wanted = max(1, min(int(wanted), count))
        if wanted == 1:
            return [IdRange(low, high)]
        positions = [i * count // wanted + 1 for i in range(wanted)]
        numbered = select(table.c.id, func.row_number().over(order_by=table.c.id).label("rn")) \
            .where(*where).subquery()
        starts = [row[0] for row in connection.execute(
            select(numbered.c.id).where(numbered.c.rn.in_(positions)).order_by(numbered.c.id))]
    ends = [start - 1 for start in starts[1:]] + [high]
    return [IdRange(first, last) for first, last in zip(starts, ends)]


def _stream(engine: Engine, statement) -> Iterator:
    with engine.connect() as connection:
        yield from connection.execution_options(yield_per=2000).execute(statement)


def _in_range(table, id_range: IdRange) -> list:
    return [table.c.id >= id_range.first, table.c.id <= id_range.last]


def messages(engine: Engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    """(id, address, routing_type, arrival ms, encoded) of the retained messages in the range."""
    r = retained_messages.c
    statement = (select(r.id, r.address, r.routing_type, r.arrival, r.encoded)
                 .where(*_in_range(retained_messages, id_range), *_where(selection))
                 .order_by(r.id))
    return _stream(engine, statement)


def _with_message_id(engine: Engine, table, selection: Selection, id_range: IdRange,
                     *columns) -> Iterator[tuple]:
    """(the message's retention id or None, *columns) of `table`'s records in the range."""
    r = retained_messages.c
    statement = (select(r.id, *columns)
                 .select_from(table.outerjoin(retained_messages, r.message_id == table.c.message_id))
                 .where(*_in_range(table, id_range), *_where(selection))
                 .order_by(table.c.id))
    return _stream(engine, statement)


def acknowledgement_records(engine: Engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    """(message's retention id, broker message id, queue, acknowledged ms, address, arrival ms)
    of the acknowledgements in the range; the last two None when the message is gone."""
    a, r = acknowledgements.c, retained_messages.c
    return _with_message_id(engine, acknowledgements, selection, id_range,
                            a.message_id, a.queue, a.at, r.address, r.arrival)


def dead_letter_records(engine: Engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    """(message's retention id or None, broker message id, original address, queue, reason,
    ms) of the dead-letter records in the range."""
    d = dead_letters.c
    return _with_message_id(engine, dead_letters, selection, id_range,
                            d.message_id, d.original_address, d.queue, d.reason, d.at)


def retained_window(engine: Engine, address: str, from_ms: int, to_ms: int,
                    batch: int = 1000) -> Iterator[tuple]:
    """(id, message_id, routing_type, arrival, encoded) of the address's rows that arrived in
    [from, to), in id (arrival) order, read in keyset pages so the store is never held in one
    transaction. A database error is a StoreError (one line)."""
    r = retained_messages.c
    after = 0
    while True:
        try:
            with engine.connect() as connection:
                rows = connection.execute(
                    select(r.id, r.message_id, r.routing_type, r.arrival, r.encoded)
                    .where(r.address == address, r.arrival >= from_ms, r.arrival < to_ms, r.id > after)
                    .order_by(r.id).limit(batch)).all()
        except SQLAlchemyError as error:  # callers outside the store know no SQLAlchemy
            raise StoreError(error) from None
        yield from rows
        if len(rows) < batch:
            return
        after = rows[-1].id


def purge(engine: Engine, retention_days: Callable[[str], int], now_ms: int,
          batch: int) -> tuple[int, int]:
    """Delete, for every address with retained rows, those older than `retention_days(address)`
    days (0: keep) and their acknowledgement records, at most `batch` rows per short
    transaction. Returns (messages, acknowledgements) removed."""
    r = retained_messages.c
    with engine.connect() as connection:
        found = [row[0] for row in connection.execute(select(r.address).distinct())]
    removed_messages = removed_acks = 0
    for address in found:
        days = retention_days(address)
        if days <= 0:
            continue
        cutoff = now_ms - days * DAY_MS
        while True:
            with engine.begin() as connection:
                rows = connection.execute(select(r.id, r.message_id).where(
                    r.address == address, r.arrival < cutoff).order_by(r.id).limit(batch)).all()
                if not rows:
                    break
                removed_acks += connection.execute(delete(acknowledgements).where(
                    acknowledgements.c.message_id.in_([row.message_id for row in rows]))).rowcount
                removed_messages += connection.execute(delete(retained_messages).where(
                    r.id.in_([row.id for row in rows]))).rowcount
            if len(rows) < batch:
                break
    return removed_messages, removed_acks

