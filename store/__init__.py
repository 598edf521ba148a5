"""Hermod's persistence: implements `broker.core.ports.Journal` on SQLite or PostgreSQL.

    journal = open_journal(url, loop.call_soon_threadsafe)   # upgrades the schema first
    recovered = journal.recover()
    journal.submit([AddMessage(...), AddReference(...)], done)  # done(None) once committed
    journal.close()

`url` is `memory`, `sqlite:///PATH` or `postgresql+psycopg://USER@HOST:PORT/DB`. Every error
raised here is a `StoreError` whose text is one line.
"""
from __future__ import annotations

from typing import Callable

from hermod.broker.core.standalone import MemoryJournal  # the one in-memory journal

from . import schema
from .errors import (
    SchemaCorrupt,
    SchemaError,
    SchemaOutdated,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    StoreUnreachable,
    UnknownMessage,
    UnknownQueue,
)
from .journal import SqlJournal
from .lease import LeaseLost
from .lock import StoreLocked, StoreLockLost
from .stats import JournalStats

__all__ = [
    "JournalStats", "LeaseLost", "MemoryJournal", "SchemaCorrupt", "SchemaError", "SchemaOutdated",
    "SchemaTooNew", "SqlJournal", "StoreClosed", "StoreError", "StoreLocked", "StoreLockLost",
    "StoreUnavailable", "StoreUnreachable", "UnknownMessage", "UnknownQueue", "open_journal", "schema",
]


DEFAULT_GIVE_UP_S = 30.0  # how long durable work waits for an unreachable store


def open_journal(url: str, post: Callable[..., object] | None, *,
                 sqlite_synchronous: str = "FULL", fail_after_s: float | None = None,
                 holder: str | None = None, lease=None,
                 membership=None, defer: Callable[..., object] | None = None) -> SqlJournal | MemoryJournal:
    """The journal for a store URL, its schema upgraded to head and checked.

    `post(callback, *args)` runs a callback on the reactor thread (`loop.call_soon_threadsafe`);
    None calls completions directly on the writer thread. `defer(fn)` (`loop.call_soon`) lets the
    journal hand a reactor turn's units to its writer at once (`SqlJournal.submit`).
    `sqlite_synchronous` is FULL (every commit survives power loss) or NORMAL (see
    `store.engine`). `fail_after_s`: how long a unit waits for an unreachable database before
    `done(StoreUnavailable)`, by default 30 s (`hermod run` passes `[store] give_up_s`).
    The journal holds the store's lock (`store.lock`) from
    before the schema upgrade until `close()`; `holder` is how it names this broker to another
    one refused (default: host and process id). `lease` (a `store.lease.Lease`, PostgreSQL
    only): this broker is the live one of a shared store; every commit checks it still holds
    the lease (LeaseLost otherwise) and the store lock is held shared. `membership` (a
    `store.ownership.Membership`, PostgreSQL only): this broker is a node of a cluster; the lock
    is held shared and every commit runs its ownership fence.
    Raises StoreError (one line) when the store is unreachable, corrupt, newer than this code,
    or locked by another broker (StoreLocked).
    """
    from .engine import display_url, is_memory, make_engine
    from .lock import acquire

    if is_memory(url):
        return MemoryJournal()  # completes every unit at once, on the caller's thread
    if fail_after_s is None:
        fail_after_s = DEFAULT_GIVE_UP_S
    engine = make_engine(url, sqlite_synchronous=sqlite_synchronous)
    lock = None
    try:
        lock = acquire(engine, display_url(engine.url), holder,
                       shared=lease is not None or membership is not None)
        for keeper in (lease, membership):
            if keeper is not None:
                keeper.guard(engine)
        schema.upgrade(engine)
        schema.check(engine)
    except BaseException:
        if lock is not None:
            lock.release()
        engine.dispose()
        raise
    return SqlJournal(engine, post, fail_after_s=fail_after_s, lock=lock,
                      fence=lease.check if lease is not None else None,
                      ownership=membership.fence if membership is not None else None,
                      defer=defer)
