"""The Applier's hot statements (messages in, references in, delivery counts, references out,
orphans out),
each sent as ONE statement per chunk of rows, in the dialect's own SQL.

Why not `executemany`. The writer thread shares the GIL with the reactor loop, which is busy
under load. Python's sqlite3 releases the GIL around every `sqlite3_step`, that is once per ROW
of an executemany, and each time has to win it back from the loop thread, which gives it up only
at its next blocking call or after the switch interval (5 ms). Measured with a spinning thread
beside the writer (500-row batches, synchronous FULL): executemany 465 msg/s; the same rows as
multi-row statements (one VALUES / IN list per 200 rows) 5,669 msg/s; alone, 108k msg/s. In the
broker (q1d, SQLite) py-spy found 69% of the writer's samples in executemany. So each statement
here carries a whole chunk: one GIL round per chunk instead of one per row. Measured after the
change (same machine, interleaved with the executemany build, load 2.5-6): broker CPU per 100k
q1d messages 5.2-5.6 s -> 4.6-4.7 s on SQLite and 5.4-5.9 s -> 3.3-3.8 s on PostgreSQL (msg/s
+50% there); the journal alone (benchmarks/store_bench.py, window 1000) 58k -> 85k units/s on
SQLite FULL and 13.7k -> 33k on PostgreSQL.

SQLite: the SQL text depends on the number of rows, so a chunk is padded up to a power of two
by repeating its last row (harmless: inserts are ON CONFLICT DO NOTHING, deletes are by key),
which keeps the distinct statements few (sqlite3 caches the prepared ones per connection) and
the text is built once per size. Chunks stay far below SQLite's bound-variable limit (32,766
since 3.32). UPDATE ... FROM needs SQLite 3.33 (2020; Debian 12 has 3.40), which
`store.engine` requires. A row-value `(q, m) IN (VALUES ...)`
would scan the table on SQLite 3.40; `IN (SELECT column1, column2 FROM (VALUES ...))` searches
the primary key, as EXPLAIN QUERY PLAN shows.

PostgreSQL, a first attempt (`PostgresBulk.write_plain`; no ON CONFLICT there): ONE
simple-query string per flush, "BEGIN; COPY messages FROM STDIN (FORMAT BINARY); INSERT refs;
UPDATE counts; DELETE refs; DELETE orphans; COMMIT", the ids as array literals (integers only)
and the messages as a binary COPY payload built in one pass (`_binary_copy_messages`). The
client waits twice: for the COPY to start, then for the end of the string. Binary COPY for the
messages because the heap takes the rows a page at a time (fewer WAL records: 6.4 -> 4.8 a
message, server CPU per 100k 1.10 -> 1.01 s against `unnest` inserts). Before, each statement
(and BEGIN, COMMIT, each COPY's start and end) was a round trip of its own, 8 a commit, and
each one a GIL hand-back from the busy reactor thread. Measured in the broker (q1d 200k,
PostgreSQL fsync on, 3 interleaved reps, load 2.3-4.1, medians): 18.1k -> 25.1k msg/s, broker
CPU per 100k 2.53 -> 2.11 s, the writer thread's share 0.72 -> 0.42 s, commit 13 -> 8 ms.
A replay uses the idempotent statements (store.journal.SqlJournal._commit): every column
travels as one array and `unnest` turns them back into rows, one statement per table per batch
whatever its size, the message bodies as binary `bytea[]`.

Rows are tuples in table order: messages (id, address, encoded, routing_type, priority,
expiration, scheduled_time, arrival); references (queue_id, message_id, delivery_count);
delivery counts (queue_id, message_id, delivery_count), one per key; reference keys
(queue_id, message_id); orphans: message ids.
"""
from __future__ import annotations

import struct
from itertools import chain
from typing import Sequence

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

try:  # psycopg's C round trip: flush, then read results until the end or a COPY starts
    from psycopg import errors as _errors
    from psycopg import pq as _pq
    from psycopg.generators import execute as _execute
    _IDLE, _COPY_IN = _pq.TransactionStatus.IDLE, _pq.ExecStatus.COPY_IN
    _FATAL_ERROR = _pq.ExecStatus.FATAL_ERROR
    from psycopg.waiting import Wait as _Wait
    _WAIT_W = _Wait.W
except ImportError:  # pragma: no cover - a SQLite-only installation
    pass

_MESSAGE_COLUMNS = "id, address, encoded, routing_type, priority, expiration, scheduled_time, arrival"
# Rows per SQLite statement: 1,024 messages are 8,192 bound variables.
_SQLITE_CHUNK = 1024


class SqliteBulk:
    """Multi-row statements on SQLite, one per chunk (see the module docstring)."""

    def __init__(self, chunk: int = _SQLITE_CHUNK) -> None:
        if chunk < 1 or chunk & (chunk - 1):
            raise ValueError("the chunk must be a power of two")
        self.chunk = chunk
        self._sql: dict[tuple[str, int], str] = {}

    def insert_messages(self, connection: Connection, rows: Sequence[tuple],
                        idempotent: bool = True) -> None:
        self._run(connection, "messages", rows)  # always idempotent: no cost measured here

    def insert_refs(self, connection: Connection, rows: Sequence[tuple],
                    idempotent: bool = True) -> None:
        self._run(connection, "refs", rows)

    def update_counts(self, connection: Connection, rows: Sequence[tuple]) -> None:
        self._run(connection, "counts", rows)

    def delete_refs(self, connection: Connection, keys: Sequence[tuple]) -> None:
        self._run(connection, "deletes", keys)

    def delete_orphans(self, connection: Connection, ids: Sequence[int]) -> None:
        self._run(connection, "orphans", ids, flat=True)

    def write(self, connection: Connection, messages: Sequence[tuple], refs: Sequence[tuple],
              counts: Sequence[tuple], deletes: Sequence[tuple], orphans: Sequence[int],
              idempotent: bool, commit: bool) -> bool:
        """The hot rows in the fixed order (store.apply); never commits (False)."""
        _in_order(self, connection, messages, refs, counts, deletes, orphans, idempotent)
        return False

    def _run(self, connection: Connection, kind: str, rows: Sequence, flat: bool = False) -> None:
        """`rows`: tuples, or single values (`flat`)."""
        chunk = self.chunk
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            size = _padded(len(part))
            sql = self._sql.get((kind, size))
            if sql is None:
                sql = self._sql[(kind, size)] = _SQLITE_BUILDERS[kind](size)
            if size > len(part):
                part = [*part, *[part[-1]] * (size - len(part))]
            connection.exec_driver_sql(sql, tuple(part) if flat else tuple(chain.from_iterable(part)))


def _padded(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _values(width: int, rows: int) -> str:
    row = "(" + ",".join("?" * width) + ")"
    return ",".join([row] * rows)


_SQLITE_BUILDERS = {
    "messages": lambda n: (f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES {_values(8, n)}"
                           " ON CONFLICT (id) DO NOTHING"),
    "refs": lambda n: ("INSERT INTO message_refs (queue_id, message_id, delivery_count) VALUES "
                       f"{_values(3, n)} ON CONFLICT (queue_id, message_id) DO NOTHING"),
    # UPDATE ... FROM needs SQLite 3.33 (2020); the Applier passes one row per key.
    "counts": lambda n: (f"UPDATE message_refs SET delivery_count = v.column3 FROM (VALUES "
                         f"{_values(3, n)}) AS v WHERE message_refs.queue_id = v.column1"
                         " AND message_refs.message_id = v.column2"),
    "deletes": lambda n: ("DELETE FROM message_refs WHERE (queue_id, message_id) IN "
                          f"(SELECT column1, column2 FROM (VALUES {_values(2, n)}))"),
    # The message goes with its last reference.
    "orphans": lambda n: (f"DELETE FROM messages WHERE id IN ({','.join('?' * n)}) AND NOT EXISTS"
                          " (SELECT 1 FROM message_refs AS r WHERE r.message_id = messages.id)"),
}


class PostgresBulk:
    """One statement per table per batch on PostgreSQL: columns as arrays, `unnest` (see the
    module docstring). `%b` sends a parameter in binary (the bodies are not escaped)."""

    _INSERT_MESSAGES = (
        f"INSERT INTO messages ({_MESSAGE_COLUMNS}) SELECT * FROM unnest("
        "%b::bigint[], %b::varchar[], %b::bytea[], %b::varchar[], %b::smallint[],"
        " %b::bigint[], %b::bigint[], %b::bigint[]) ON CONFLICT (id) DO NOTHING")
    _INSERT_REFS = (
        "INSERT INTO message_refs (queue_id, message_id, delivery_count) SELECT * FROM"
        " unnest(%s::integer[], %s::bigint[], %s::integer[])"
        " ON CONFLICT (queue_id, message_id) DO NOTHING")
    _UPDATE_COUNTS = (
        "UPDATE message_refs AS r SET delivery_count = d.n"
        " FROM unnest(%s::integer[], %s::bigint[], %s::integer[]) AS d(q, m, n)"
        " WHERE r.queue_id = d.q AND r.message_id = d.m")
    _DELETE_REFS = (
        "DELETE FROM message_refs AS r USING unnest(%s::integer[], %s::bigint[]) AS d(q, m)"
        " WHERE r.queue_id = d.q AND r.message_id = d.m")
    _DELETE_ORPHANS = (
        "DELETE FROM messages WHERE id = ANY(%s::bigint[])"
        " AND NOT EXISTS (SELECT 1 FROM message_refs AS r WHERE r.message_id = messages.id)")

    def insert_messages(self, connection: Connection, rows: Sequence[tuple],
                        idempotent: bool = True) -> None:
        """Always idempotent: a first attempt goes by `write_plain`."""
        connection.exec_driver_sql(self._INSERT_MESSAGES, tuple(map(list, zip(*rows))))

    def insert_refs(self, connection: Connection, rows: Sequence[tuple],
                    idempotent: bool = True) -> None:
        connection.exec_driver_sql(self._INSERT_REFS, tuple(map(list, zip(*rows))))

    def update_counts(self, connection: Connection, rows: Sequence[tuple]) -> None:
        connection.exec_driver_sql(self._UPDATE_COUNTS, tuple(map(list, zip(*rows))))

    def delete_refs(self, connection: Connection, keys: Sequence[tuple]) -> None:
        connection.exec_driver_sql(self._DELETE_REFS, tuple(map(list, zip(*keys))))

    def delete_orphans(self, connection: Connection, ids: Sequence[int]) -> None:
        connection.exec_driver_sql(self._DELETE_ORPHANS, (list(ids),))


    def write(self, connection: Connection, messages: Sequence[tuple], refs: Sequence[tuple],
              counts: Sequence[tuple], deletes: Sequence[tuple], orphans: Sequence[int],
              idempotent: bool, commit: bool) -> bool:
        """The hot rows in the fixed order (store.apply). A first attempt goes as one query
        string (`write_plain`), ending the transaction when `commit` (True: committed); a
        replay, statement by statement."""
        if idempotent:
            _in_order(self, connection, messages, refs, counts, deletes, orphans, idempotent)
            return False
        self.write_plain(connection, messages, refs, counts, deletes, orphans, commit)
        return commit

    # The plain write (`write_plain`): one simple-query string, so that BEGIN, the COPY and
    # every statement after it (COMMIT too when asked) cost two round trips in all.
    _COPY_MESSAGES = f"COPY messages ({_MESSAGE_COLUMNS}) FROM STDIN (FORMAT BINARY)"
    _PLAIN_REFS = ("INSERT INTO message_refs (queue_id, message_id, delivery_count) SELECT * FROM"
                   " unnest('{%s}'::integer[], '{%s}'::bigint[], '{%s}'::integer[])")
    _PLAIN_COUNTS = ("UPDATE message_refs AS r SET delivery_count = d.n FROM unnest("
                     "'{%s}'::integer[], '{%s}'::bigint[], '{%s}'::integer[]) AS d(q, m, n)"
                     " WHERE r.queue_id = d.q AND r.message_id = d.m")
    _PLAIN_DELETES = ("DELETE FROM message_refs AS r USING unnest('{%s}'::integer[],"
                      " '{%s}'::bigint[]) AS d(q, m) WHERE r.queue_id = d.q AND r.message_id = d.m")
    _PLAIN_ORPHANS = ("DELETE FROM messages WHERE id = ANY('{%s}'::bigint[]) AND NOT EXISTS"
                      " (SELECT 1 FROM message_refs AS r WHERE r.message_id = messages.id)")

    def write_plain(self, connection: Connection, messages: Sequence[tuple], refs: Sequence[tuple],
                    counts: Sequence[tuple], deletes: Sequence[tuple], orphans: Sequence[int],
                    commit: bool) -> None:
        """The hot rows of a first attempt (no ON CONFLICT), in the fixed order, with as few
        round trips as the protocol allows: ONE simple-query string holds BEGIN (unless the
        transaction has begun), `COPY messages FROM STDIN`, the other statements with their
        ids as array literals, and COMMIT when `commit`; the client waits once for the COPY to
        start and once for the end. A statement that fails ends the string there (PostgreSQL
        skips the rest, COMMIT included), leaving the transaction failed for the caller's
        rollback. Before (a COPY each, statements one by one): 8 round trips a commit, each
        a wait for the server and a GIL hand-back from the busy reactor thread."""
        import psycopg  # only PostgreSQL stores get here

        session = connection.connection.driver_connection
        assert session is not None, "a connection in a transaction has its driver's session"
        pgconn = session.pgconn
        statements = []
        if pgconn.transaction_status == _IDLE:
            statements.append("BEGIN")
        payload = None
        if messages:
            payload = _binary_copy_messages(messages)
            statements.append(self._COPY_MESSAGES)
        if refs:
            statements.append(self._PLAIN_REFS % _columns(refs, 3))
        if counts:
            statements.append(self._PLAIN_COUNTS % _columns(counts, 3))
        if deletes:
            statements.append(self._PLAIN_DELETES % _columns(deletes, 2))
        if orphans:
            statements.append(self._PLAIN_ORPHANS % _ints(orphans))
        if commit:
            statements.append("COMMIT")
        sql = ";".join(statements)
        try:
            pgconn.send_query(sql.encode())
            results = session.wait(_execute(pgconn))
            if payload is not None:
                _raise_failed(pgconn, results)
                if not results or results[-1].status != _COPY_IN:
                    raise psycopg.InternalError("the COPY of the messages did not start")
                results = session.wait(_copy_in(pgconn, payload))
            _raise_failed(pgconn, results)
        except psycopg.Error as error:
            raise DBAPIError.instance(sql[:200], None, error, psycopg.Error) from error


def _raise_failed(pgconn, results: list) -> None:
    """The error of the statement that ended the query string, if one did."""
    for result in results:
        if result.status == _FATAL_ERROR:
            raise _errors.error_from_result(result, encoding=pgconn._encoding)


def _in_order(bulk: SqliteBulk | PostgresBulk, connection: Connection, messages: Sequence[tuple],
              refs: Sequence[tuple], counts: Sequence[tuple], deletes: Sequence[tuple],
              orphans: Sequence[int], idempotent: bool) -> None:
    if messages:
        bulk.insert_messages(connection, messages, idempotent)
    if refs:
        bulk.insert_refs(connection, refs, idempotent)
    if counts:
        bulk.update_counts(connection, counts)
    if deletes:
        bulk.delete_refs(connection, deletes)
    if orphans:
        bulk.delete_orphans(connection, orphans)


def _copy_in(pgconn, payload: bytes):
    """psycopg generator (run by `session.wait`): the COPY data and its end, then the results
    up to the end of the query string. In chunks: libpq refuses one too large for its buffer."""
    view = memoryview(payload)
    for start in range(0, len(view), _COPY_CHUNK):
        while pgconn.put_copy_data(view[start:start + _COPY_CHUNK]) == 0:
            yield _WAIT_W
    while pgconn.put_copy_end(None) == 0:
        yield _WAIT_W
    return (yield from _execute(pgconn))


_COPY_CHUNK = 1 << 20


def _ints(values: Sequence[int]) -> str:
    """An array literal's elements; `int.__repr__` refuses anything but an integer."""
    return ",".join(map(int.__repr__, values))


def _columns(rows: Sequence[tuple], width: int) -> tuple[str, ...]:
    return tuple(_ints(column) for column in zip(*rows)) if rows else ("",) * width


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no header extension
_COPY_TRAILER = b"\xff\xff"
_NULL = struct.pack(">i", -1)


def _binary_copy_messages(rows: Sequence[tuple]) -> bytes:
    """The rows of `messages` in COPY's binary format, built in one pass: per row a field
    count, then each field as its length and bytes (big-endian integers); text fields are
    encoded once per distinct value."""
    parts = [_COPY_HEADER]
    append = parts.append
    text: dict[str | None, bytes] = {None: _NULL}
    head, number, small = _ROW_HEAD.pack, _INT8_FIELD.pack, _INT2_FIELD.pack
    size = _LENGTH.pack
    for message_id, address, encoded, routing_type, priority, expiration, scheduled, arrival in rows:
        a = text.get(address)
        if a is None:
            data = address.encode()
            a = text[address] = size(len(data)) + data
        r = text.get(routing_type)
        if r is None:
            data = routing_type.encode()
            r = text[routing_type] = size(len(data)) + data
        append(head(8, 8, message_id))
        append(a)
        append(size(len(encoded)))
        append(encoded)
        append(r)
        append(small(2, priority) + number(8, expiration) + number(8, scheduled)
               + number(8, arrival))
    append(_COPY_TRAILER)
    return b"".join(parts)


_ROW_HEAD = struct.Struct(">hiq")  # 8 fields, then the id (length 8, value)
_INT8_FIELD = struct.Struct(">iq")
_INT2_FIELD = struct.Struct(">ih")
_LENGTH = struct.Struct(">i")


def for_dialect(dialect: str) -> SqliteBulk | PostgresBulk:
    return PostgresBulk() if dialect == "postgresql" else SqliteBulk()
