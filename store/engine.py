"""One SQLAlchemy engine per store URL.

URLs:
- `memory`: no database at all (the caller uses `MemoryJournal`); `make_engine` refuses it.
- `sqlite:////abs/path.db` and `sqlite:///rel/path.db`: a file; a relative path resolves against
  the working directory and the parent directory is created.
- `postgresql+psycopg://user@host:port/db` (`postgresql://` is taken to mean the same): psycopg 3.

SQLite runs in WAL mode with foreign keys on. `synchronous=FULL` (the default) makes every
commit durable against power loss; `NORMAL` is the documented relaxation: in WAL mode a commit
can then be lost on power failure or an OS crash (never on a crash of the broker process
alone), and the database stays consistent either way. Only the writer thread writes, so there is
no lock contention to tune beyond a busy timeout for outside readers (Spark, `replay`).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from .errors import StoreError, StoreUnreachable

MEMORY = "memory"
SYNCHRONOUS_MODES = ("FULL", "NORMAL")
# store.bulk's statements: UPDATE ... FROM (3.33) and 32,766 bound variables (3.32).
SQLITE_MIN_VERSION = (3, 33)
# Seconds a connection attempt to PostgreSQL may take before the store reports it unreachable.
CONNECT_TIMEOUT_S = 5


def is_memory(url: str) -> bool:
    return url.strip() == MEMORY


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL with a relative SQLite path made absolute and the driver settled."""
    if is_memory(url):
        raise StoreError("the 'memory' store has no database (use store.MemoryJournal)")
    try:
        parsed = make_url(url.strip())
    except ArgumentError as error:
        raise StoreError(f"invalid store URL {url!r}: expected 'memory', 'sqlite:///PATH' or "
                         "'postgresql+psycopg://USER@HOST:PORT/DB'") from error
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database).expanduser()
            if not path.is_absolute():
                path = Path.cwd() / path
            parsed = parsed.set(database=str(path))
        return parsed
    if backend == "postgresql":
        if parsed.drivername != "postgresql+psycopg":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return parsed
    raise StoreError(f"unsupported store URL {display_url(parsed)}: use 'memory', "
                     "'sqlite:///PATH' or 'postgresql+psycopg://...'")


def display_url(url: URL | str) -> str:
    """The URL as it may appear in logs and error lines (no password)."""
    if isinstance(url, str):
        try:
            parsed = make_url(url)
        except ArgumentError:
            return url
    else:
        parsed = url
    return parsed.render_as_string(hide_password=True)


def make_engine(url: str | URL, *, sqlite_synchronous: str = "FULL") -> Engine:
    """An engine for a SQLite or PostgreSQL store (see the module docstring)."""
    parsed = parse_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, sqlite_synchronous)
    try:
        import psycopg  # noqa: F401 - only to tell a missing driver apart from a bad URL
    except ImportError:
        raise StoreError("a PostgreSQL store needs psycopg, which is not installed: "
                         "pip install 'hermod-broker[postgresql]'") from None
    return create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=2,  # the writer thread and a caller's checks; nothing else connects
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "hermod"},
    )


def _sqlite_engine(url: URL, synchronous: str) -> Engine:
    if sqlite3.sqlite_version_info < SQLITE_MIN_VERSION:
        raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old for the store: "
                         f"{'.'.join(map(str, SQLITE_MIN_VERSION))} or newer is needed")
    mode = synchronous.upper()
    if mode not in SYNCHRONOUS_MODES:
        raise StoreError(f"invalid SQLite synchronous mode {synchronous!r}: use FULL or NORMAL")
    database = url.database or ""
    in_memory = database in ("", ":memory:")
    if not in_memory and not database.startswith("file:"):
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreUnreachable(f"store {database}: cannot create its directory: "
                                   f"{error.strerror or error}") from error
    kwargs: dict = {}
    if in_memory:
        # One shared connection, or every checkout would see a different empty database.
        kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # pragma: no branch - tiny
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={mode}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=5000")
        finally:
            cursor.close()

    return engine
