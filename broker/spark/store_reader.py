"""Reading the store's retention tables in id ranges, for Spark partitions.

Theory of operation. The driver counts the selected rows once and, for N partitions, picks the
ids at row positions 0, n/N, 2n/N ... (one window-function query), so every partition holds about
the same number of rows however sparse the ids of one address are. Partition i reads ids in
[boundary i, boundary i+1) with the same filters, the last one up to the highest id the driver
saw: the ranges tile the selection, so every row is read exactly once, and rows that arrive
while the job runs are not half-included. Executors read their range with a streaming cursor
through SQLAlchemy (SQLite or PostgreSQL; no JDBC).

Tables (option `table`): `messages` (retained messages, the contract's columns), and, for the
analytics job, `acknowledgements` (joined to the retained message for its address and arrival)
and `dead_letters`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

ROWS_PER_PARTITION = 100_000
TABLES = ("messages", "acknowledgements", "dead_letters")

ACKNOWLEDGEMENT_SCHEMA = ("id BIGINT, message_id BIGINT, queue STRING, acknowledged_time TIMESTAMP, "
                          "address STRING, arrival_time TIMESTAMP, latency_ms BIGINT")
DEAD_LETTER_SCHEMA = ("id BIGINT, message_id BIGINT, original_address STRING, queue STRING, "
                      "reason STRING, time TIMESTAMP")


class ReadError(ValueError):
    """Bad read options (one line)."""


@dataclass(frozen=True)
class Selection:
    """What to read; picklable, built on the driver and shipped to executors."""

    url: str
    table: str = "messages"
    addresses: tuple[str, ...] | None = None  # None: every address
    from_ms: int | None = None
    to_ms: int | None = None


@dataclass(frozen=True)
class IdRange:
    first: int  # inclusive
    last: int  # inclusive


def schema_of(table: str) -> str:
    from .rows import SCHEMA

    return {"messages": SCHEMA, "acknowledgements": ACKNOWLEDGEMENT_SCHEMA,
            "dead_letters": DEAD_LETTER_SCHEMA}[table]


def _table(name: str):
    from hermod.store.models import acknowledgements, dead_letters, retained_messages

    return {"messages": retained_messages, "acknowledgements": acknowledgements,
            "dead_letters": dead_letters}[name]


def _where(selection: Selection, table) -> list:
    """The selection's filters on the table's own columns."""
    c = table.c
    address_column = {"messages": "address", "dead_letters": "original_address"}.get(selection.table)
    time_column = c.arrival if selection.table == "messages" else c.at
    clauses = []
    if selection.addresses is not None and address_column is not None:
        clauses.append(c[address_column].in_(selection.addresses))
    if selection.from_ms is not None:
        clauses.append(time_column >= selection.from_ms)
    if selection.to_ms is not None:
        clauses.append(time_column < selection.to_ms)
    return clauses


def resolve_addresses(engine, table: str, pattern: str | None) -> tuple[str, ...] | None:
    """The concrete addresses an `address` option names (`match` wildcards allowed)."""
    if pattern is None:
        return None
    from hermod.broker.core import wildcards

    if not any(ch in pattern for ch in "*#>"):
        return (pattern,)
    from sqlalchemy import select

    from hermod.store.models import dead_letters, retained_messages

    column = dead_letters.c.original_address if table == "dead_letters" else retained_messages.c.address
    with engine.connect() as connection:
        found = [row[0] for row in connection.execute(select(column).distinct())]
    return tuple(sorted(a for a in found if wildcards.matches(pattern, a)))


def plan(engine, selection: Selection, partitions: int | None) -> list[IdRange]:
    """Id ranges for `partitions` Spark partitions (default one per 100 000 rows); exactly that
    many when there are at least that many rows, else one per row (never fewer than one)."""
    from sqlalchemy import func, select

    table = _table(selection.table)
    where = _where(selection, table)
    if selection.table == "acknowledgements" and selection.addresses is not None:
        where.append(table.c.message_id.in_(_retained_ids(selection)))
    with engine.connect() as connection:
        count, low, high = connection.execute(
            select(func.count(), func.min(table.c.id), func.max(table.c.id)).where(*where)).one()
        if not count:
            return [IdRange(1, 0)]
        wanted = partitions if partitions else math.ceil(count / ROWS_PER_PARTITION)
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


def _retained_ids(selection: Selection):
    from sqlalchemy import select

    from hermod.store.models import retained_messages as r

    return select(r.c.message_id).where(r.c.address.in_(selection.addresses))


def read(selection: Selection, id_range: IdRange, engine=None) -> Iterator[tuple]:
    """The rows of one partition, in id order, as the table's Spark columns."""
    if id_range.first > id_range.last:
        return
    from hermod.store.engine import make_engine

    own = engine is None
    engine = make_engine(selection.url) if own else engine
    try:
        reader = {"messages": _read_messages, "acknowledgements": _read_acknowledgements,
                  "dead_letters": _read_dead_letters}[selection.table]
        yield from reader(engine, selection, id_range)
    finally:
        if own:
            engine.dispose()


def _stream(engine, statement) -> Iterator:
    with engine.connect() as connection:
        result = connection.execution_options(yield_per=2000).execute(statement)
        yield from result


def _read_messages(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    from .rows import epoch_ms_to_datetime

    for row in _raw_messages(engine, selection, id_range):
        yield (*row[:6], epoch_ms_to_datetime(row[6]), epoch_ms_to_datetime(row[7]), *row[8:])


def _raw_messages(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    """The contract's columns with both timestamps as epoch ms (or None)."""
    from sqlalchemy import select

    from hermod.store.models import retained_messages as r

    from .rows import message_columns

    statement = (select(r.c.id, r.c.address, r.c.routing_type, r.c.arrival, r.c.encoded)
                 .where(r.c.id >= id_range.first, r.c.id <= id_range.last, *_where(selection, r))
                 .order_by(r.c.id))
    for ident, address, routing_type, arrival, encoded in _stream(engine, statement):
        cols = message_columns(bytes(encoded))
        yield (ident, address, routing_type, *cols[:4], arrival, *cols[4:])


def read_arrow(selection: Selection, id_range: IdRange, arrow_schema, rows_per_batch: int = 4096):
    """The messages of one partition as Arrow record batches in `arrow_schema` (the contract's
    columns): Spark takes them as they are, with no per-value conversion in Python."""
    if id_range.first > id_range.last:
        return
    import pyarrow as pa

    from hermod.store.engine import make_engine

    types = [field.type for field in arrow_schema]
    timestamps = {6, 7}
    engine = make_engine(selection.url)
    try:
        columns: list[list] = [[] for _ in types]
        appends = [column.append for column in columns]
        count = 0
        for row in _raw_messages(engine, selection, id_range):
            for i, append in enumerate(appends):
                value = row[i]
                if i in timestamps and value is not None:
                    value = value * 1000  # ms -> the schema's microseconds
                append(value)
            count += 1
            if count == rows_per_batch:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(c, type=t) for c, t in zip(columns, types)], schema=arrow_schema)
                for column in columns:
                    column.clear()
                count = 0
        if count:
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=t) for c, t in zip(columns, types)], schema=arrow_schema)
    finally:
        engine.dispose()


def _read_acknowledgements(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    from sqlalchemy import select

    from hermod.store.models import acknowledgements as a, retained_messages as r

    from .rows import epoch_ms_to_datetime

    where = _where(selection, a)
    if selection.addresses is not None:
        where.append(r.c.address.in_(selection.addresses))
    statement = (select(a.c.id, a.c.message_id, a.c.queue, a.c.at, r.c.address, r.c.arrival)
                 .select_from(a.outerjoin(r, r.c.message_id == a.c.message_id))
                 .where(a.c.id >= id_range.first, a.c.id <= id_range.last, *where)
                 .order_by(a.c.id))
    for ident, message_id, queue, at, address, arrival in _stream(engine, statement):
        latency = None if arrival is None else at - arrival
        yield (ident, message_id, queue, epoch_ms_to_datetime(at), address,
               epoch_ms_to_datetime(arrival), latency)


def _read_dead_letters(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    from sqlalchemy import select

    from hermod.store.models import dead_letters as d

    from .rows import epoch_ms_to_datetime

    statement = (select(d.c.id, d.c.message_id, d.c.original_address, d.c.queue, d.c.reason, d.c.at)
                 .where(d.c.id >= id_range.first, d.c.id <= id_range.last, *_where(selection, d))
                 .order_by(d.c.id))
    for ident, message_id, original, queue, reason, at in _stream(engine, statement):
        yield ident, message_id, original, queue, reason, epoch_ms_to_datetime(at)
