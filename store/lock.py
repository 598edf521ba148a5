"""The store lock: one broker per store (contract, "High availability and bridges").

Every broker holds its store's lock while it runs; a second broker on the same store fails
with `StoreLocked`, whose one line names the holder, before it changes anything in the store.
Both kinds of lock die with their holder, so a SIGKILLed broker never leaves a stale lock:

- SQLite: `fcntl.flock` on `<database>.lock` next to the database file, which also holds the
  holder's name (written once the lock is ours; read by whoever is refused).
- PostgreSQL: a session advisory lock (`pg_try_advisory_lock`) held by the very session the
  journal commits on: `connect()` hands the locked connection to the writer. The lock and the
  writes therefore end together: if that session dies (server restart, pg_terminate_backend, a
  proxy dropping it), its open transaction is rolled back with it, and the broker commits
  nothing more until it has taken the lock again on a new session. A lock on a session of its
  own would not do: that session alone could die, freeing the lock while the broker still
  commits, and a second broker could then take the store and hand out the same message ids.
  The holder's name is that session's `application_name`, which the refused broker reads from
  `pg_stat_activity`: it goes with the session, so no table and no schema change are needed and
  nothing stale is ever left. A new session of the writer takes the lock before anything else,
  and refuses to write (`StoreLockLost`, treated like an unreachable database) while another
  broker holds it.
  Brokers of `[ha] mode = "shared-store"` hold the same advisory lock SHARED (a live broker and
  one paused or cut off from its clients may hold it together; the lease in `store.lease`
  decides which of them is live), so a broker without [ha] is refused while any of them runs,
  and they are refused while it runs.
"""
from __future__ import annotations

import fcntl
import logging
import os
import socket
from pathlib import Path

from sqlalchemy import Connection, Engine

from .errors import StoreError, StoreUnreachable, one_line

log = logging.getLogger(__name__)

# pg_try_advisory_lock(key1, key2): "HRMD", 1. Advisory locks are per database.
_PG_KEYS = (0x48524D44, 1)
_APPLICATION_PREFIX = "hermod "
_PG_NAME_MAX = 63  # NAMEDATALEN - 1: longer application names are cut by the server


class StoreLocked(StoreError):
    """Another broker holds the store's lock."""


class StoreLockLost(StoreError):
    """The lock went with a lost database session and another broker has taken it since."""


def default_holder() -> str:
    """How this broker names itself when no [ha] node is configured."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def acquire(engine: Engine, where: str, holder: str | None = None,
            shared: bool = False) -> "StoreLock | None":
    """Take the store's lock for this process (None: an in-memory SQLite database, which no
    other process can share). Raises StoreLocked naming the holder. `shared`: PostgreSQL only,
    for shared-store brokers (see the module docstring)."""
    holder = holder or default_holder()
    if engine.dialect.name == "sqlite":
        database = engine.url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return None
        return _FileLock(Path(database + ".lock"), where, holder)
    return _AdvisoryLock(engine, where, holder, shared)


class StoreLock:
    def connect(self, engine: Engine) -> Connection:
        """The writer's connection to the store, for every transaction it commits; called
        again (for a new one) after the writer dropped the last one."""
        return engine.connect()

    def release(self) -> None:
        raise NotImplementedError


class _FileLock(StoreLock):
    def __init__(self, path: Path, where: str, holder: str) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise StoreUnreachable(f"store {where}: cannot open its lock file {path}: "
                                   f"{error.strerror or error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            named = os.pread(fd, 1024, 0).decode(errors="replace").strip()
            os.close(fd)
            raise StoreLocked(f"store {where} is in use by another broker: "
                              f"{named or 'unknown holder'} (lock file {path})") from None
        except OSError as error:
            os.close(fd)
            raise StoreUnreachable(f"store {where}: cannot lock {path}: "
                                   f"{error.strerror or error}") from error
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{holder}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor releases the flock


class _AdvisoryLock(StoreLock):
    """The lock on the session the journal writes on (see the module docstring). Taken at
    start, before the schema upgrade, on a connection that `connect()` then hands to the writer."""

    def __init__(self, engine: Engine, where: str, holder: str, shared: bool = False) -> None:
        self._engine = engine
        self._suffix = "_shared" if shared else ""
        self._where = where
        self._application = (_APPLICATION_PREFIX + holder)[:_PG_NAME_MAX]
        self._released = False
        self._lost_logged = False
        self._connection: Connection | None = self._take()

    def _take(self) -> Connection:
        """A new session of the engine holding the lock; StoreLocked names who holds it else."""
        try:
            connection = self._engine.connect()
        except Exception as error:  # server away, refused, bad credentials
            raise StoreUnreachable(f"store {self._where} is unreachable: {_cause(error)}") from error
        try:
            connection.exec_driver_sql("SELECT set_config('application_name', %s, false)",
                                       (self._application,))
            got = connection.exec_driver_sql(f"SELECT pg_try_advisory_lock{self._suffix}(%s, %s)",
                                             _PG_KEYS).scalar()
            holder = None if got else connection.exec_driver_sql(
                "SELECT a.application_name, a.client_addr, a.pid FROM pg_locks l"
                " JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s"
                " AND l.objid = %s AND l.objsubid = 2"
                " AND l.database = (SELECT oid FROM pg_database"
                "                   WHERE datname = current_database())",
                _PG_KEYS).fetchone()
            connection.commit()  # the session lock outlives the transaction
        except Exception as error:
            _discard(connection)
            raise StoreUnreachable(f"store {self._where} is unreachable: {_cause(error)}") from error
        if got:
            return connection
        _discard(connection)
        if holder is None:
            named = "unknown holder (it released the lock meanwhile?)"
        elif (holder[0] or "").startswith(_APPLICATION_PREFIX):
            named = holder[0][len(_APPLICATION_PREFIX):]
        else:
            named = f"session pid {holder[2]} from {holder[1] or 'a local socket'}"
        raise StoreLocked(f"store {self._where} is in use by another broker: {named}")

    def connect(self, engine: Engine) -> Connection:
        """The session holding the lock: the one taken at start, else a new one that takes the
        lock first (the last one is gone, and the lock went with it)."""
        if self._released:
            raise StoreUnreachable(f"store {self._where}: the store lock was released")
        connection = self._connection
        if connection is not None and not connection.invalidated and not connection.closed:
            return connection
        self._connection = None
        if connection is not None:
            _discard(connection)
        try:
            self._connection = self._take()
        except StoreLocked as error:
            if not self._lost_logged:
                self._lost_logged = True
                log.error("%s; this broker writes nothing until it has the lock again", error)
            raise StoreLockLost(str(error)) from None
        if self._lost_logged:
            log.warning("store %s: lock taken again", self._where)
        self._lost_logged = False
        return self._connection

    def release(self) -> None:
        self._released = True
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if not connection.invalidated and not connection.closed:
            try:
                # Unlocked before this returns: the server ends a closed session's backend
                # (and its locks) a moment after the client has gone.
                connection.exec_driver_sql(f"SELECT pg_advisory_unlock{self._suffix}(%s, %s)", _PG_KEYS)
                connection.commit()
            except Exception:  # the session is gone already, and its lock with it
                pass
        _discard(connection)


def _discard(connection: Connection) -> None:
    """Close a session for good: never back to the pool (it may hold the lock, or be broken)."""
    try:
        if not connection.closed:
            connection.invalidate()
            connection.close()
    except Exception:  # already broken: nothing left to close
        pass


def _cause(error: BaseException) -> str:
    orig = getattr(error, "orig", None)  # a DBAPIError's driver exception says it best
    return one_line(orig if isinstance(orig, BaseException) else error)
