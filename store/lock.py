"""The store lock: one broker per store (contract, "High availability and bridges").

Every broker holds its store's lock while it runs; a second broker on the same store fails
with `StoreLocked`, whose one line names the holder, before it changes anything in the store.
Both kinds of lock die with their holder, so a SIGKILLed broker never leaves a stale lock:

- SQLite: `fcntl.flock` on `<database>.lock` next to the database file, which also holds the
  holder's name (written once the lock is ours; read by whoever is refused).
- PostgreSQL: a session advisory lock (`pg_try_advisory_lock`) on a connection of its own,
  outside the engine's pool. The holder's name is that session's `application_name`, which the
  refused broker reads from `pg_stat_activity`: it goes with the session, so no table and no
  schema change are needed and nothing stale is ever left. If the server restarts, the session
  and its lock are gone: the writer calls `ensure()` on every reconnection, which takes the lock
  again, and refuses to write (`StoreLockLost`, treated like an unreachable database) while
  another broker holds it.
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

from sqlalchemy import Engine

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
    def ensure(self) -> None:
        """Called by the writer before it uses a new database connection."""

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
    def __init__(self, engine: Engine, where: str, holder: str, shared: bool = False) -> None:
        self._engine = engine
        self._suffix = "_shared" if shared else ""
        self._where = where
        self._application = (_APPLICATION_PREFIX + holder)[:_PG_NAME_MAX]
        self._connection = None
        self._released = False
        self._lost_logged = False
        self._take()

    def _connect(self):
        """A DBAPI connection of its own: the pool must never hand the locked session out."""
        dialect = self._engine.dialect
        args, kwargs = dialect.create_connect_args(self._engine.url)
        kwargs = {**kwargs, "application_name": self._application, "connect_timeout": 5}
        try:
            connection = dialect.loaded_dbapi.connect(*args, **kwargs)
        except Exception as error:  # psycopg.OperationalError: server away, refused
            raise StoreUnreachable(f"store {self._where} is unreachable: {one_line(error)}") from error
        connection.autocommit = True
        return connection

    def _take(self) -> None:
        connection = self._connect()
        try:
            got = connection.execute(f"SELECT pg_try_advisory_lock{self._suffix}(%s, %s)", _PG_KEYS).fetchone()[0]
            if got:
                self._connection = connection
                return
            holder = connection.execute(
                "SELECT a.application_name, a.client_addr, a.pid FROM pg_locks l"
                " JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s"
                " AND l.objid = %s AND l.objsubid = 2"
                " AND l.database = (SELECT oid FROM pg_database"
                "                   WHERE datname = current_database())",
                _PG_KEYS).fetchone()
        finally:
            if self._connection is not connection:
                connection.close()
        if holder is None:
            named = "unknown holder (it released the lock meanwhile?)"
        elif (holder[0] or "").startswith(_APPLICATION_PREFIX):
            named = holder[0][len(_APPLICATION_PREFIX):]
        else:
            named = f"session pid {holder[2]} from {holder[1] or 'a local socket'}"
        raise StoreLocked(f"store {self._where} is in use by another broker: {named}")

    def ensure(self) -> None:
        if self._released:
            return
        if self._connection is not None:
            try:
                self._connection.execute("SELECT 1")
                return
            except Exception:  # the session is gone (server restarted): so is the lock
                self._drop()
        try:
            self._take()
        except StoreLocked as error:
            if not self._lost_logged:
                self._lost_logged = True
                log.error("%s; this broker writes nothing until it has the lock again", error)
            raise StoreLockLost(str(error)) from None
        if self._lost_logged:
            log.warning("store %s: lock taken again", self._where)
        self._lost_logged = False

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass

    def release(self) -> None:
        self._released = True
        if self._connection is not None:
            try:
                # Unlocked before this returns: the server ends a closed session's backend
                # (and its locks) a moment after the client has gone.
                self._connection.execute(f"SELECT pg_advisory_unlock{self._suffix}(%s, %s)", _PG_KEYS)
            except Exception:  # the session is gone already, and its lock with it
                pass
        self._drop()
