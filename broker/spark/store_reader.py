"""Reading the store's retention tables in id ranges, for Spark partitions: the rows as the
contract's columns. The queries, and how ranges tile a selection so every row is read exactly
once, are in `store.retention`; this module turns their rows into Spark's columns (or Arrow
batches). Executors read their range through SQLAlchemy (SQLite or PostgreSQL; no JDBC).

Tables (option `table`): `messages` (retained messages, the contract's columns),
`acknowledgements` and `dead_letters` (one row per record: the message's `id` in `messages`,
its `address`, the time and, for dead letters, the reason).
"""
from __future__ import annotations

from typing import Iterator

from hermod.store import retention
from hermod.store.retention import TABLES, IdRange, Selection  # noqa: F401 - the reader's names

ROWS_PER_PARTITION = 100_000

ACKNOWLEDGEMENT_SCHEMA = ("id BIGINT, message_id BIGINT, queue STRING, acknowledged_time TIMESTAMP, "
                          "address STRING, arrival_time TIMESTAMP, latency_ms BIGINT")
# `original_address` is `address` under the name the analytics output uses.
DEAD_LETTER_SCHEMA = ("id BIGINT, message_id BIGINT, address STRING, original_address STRING, "
                      "queue STRING, reason STRING, time TIMESTAMP")


class ReadError(ValueError):
    """Bad read options (one line)."""


def schema_of(table: str) -> str:
    from .rows import SCHEMA

    return {"messages": SCHEMA, "acknowledgements": ACKNOWLEDGEMENT_SCHEMA,
            "dead_letters": DEAD_LETTER_SCHEMA}[table]


def resolve_addresses(engine, table: str, pattern: str | None) -> tuple[str, ...] | None:
    """The concrete addresses an `address` option names (`match` wildcards allowed)."""
    if pattern is None:
        return None
    from hermod.broker.core import wildcards

    if not any(ch in pattern for ch in "*#>"):
        return (pattern,)
    return tuple(sorted(a for a in retention.addresses(engine, table) if wildcards.matches(pattern, a)))


def plan(engine, selection: Selection, partitions: int | None) -> list[IdRange]:
    """Id ranges for `partitions` Spark partitions (default one per 100 000 rows)."""
    return retention.plan(engine, selection, partitions, ROWS_PER_PARTITION)


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


def _read_messages(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    from .rows import epoch_ms_to_datetime

    for row in _raw_messages(engine, selection, id_range):
        yield (*row[:6], epoch_ms_to_datetime(row[6]), epoch_ms_to_datetime(row[7]), *row[8:])


def _raw_messages(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    """The contract's columns with both timestamps as epoch ms (or None)."""
    from .rows import message_columns

    for ident, address, routing_type, arrival, encoded in retention.messages(engine, selection, id_range):
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
    from .rows import epoch_ms_to_datetime

    for ident, message_id, queue, at, address, arrival in \
            retention.acknowledgement_records(engine, selection, id_range):
        latency = None if arrival is None else at - arrival
        yield (ident, message_id, queue, epoch_ms_to_datetime(at), address,
               epoch_ms_to_datetime(arrival), latency)


def _read_dead_letters(engine, selection: Selection, id_range: IdRange) -> Iterator[tuple]:
    from .rows import epoch_ms_to_datetime

    for ident, message_id, original, queue, reason, at in \
            retention.dead_letter_records(engine, selection, id_range):
        yield ident, message_id, original, original, queue, reason, epoch_ms_to_datetime(at)
