"""Outage or fault? How the journal tells a database it cannot reach now (keep the work, retry it
later) from a unit the database refuses (fail that unit alone)."""
from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from .errors import StoreUnreachable, one_line
from .lock import StoreLockLost


class Unreachable(Exception):
    """The database could not be reached; the work is intact and may be retried."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(one_line(cause))
        self.cause = cause


# SQLSTATE classes of PostgreSQL errors that are the database's state, not the unit's fault:
# connection exception, transaction rollback (serialization failure, deadlock), insufficient
# resources (disk full, out of memory, too many connections), operator intervention (admin or
# crash shutdown, cannot connect now), system error (I/O). Anything else the server answers
# (data exception 22, integrity 23, program limit 54: a 3 KB duplicate id over the index row
# limit, syntax 42...) is the unit's own fault: retrying it cannot help, and waiting on it would
# stall every unit behind it.
_PG_OUTAGE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
# SQLite primary result codes that say the same (the file, not the unit): busy, locked, I/O
# error, disk full, cannot open, read-only (a file system remounted read-only), protocol.
_SQLITE_OUTAGE_CODES = frozenset({5, 6, 8, 10, 13, 14, 15})


def unreachable(error: BaseException, sqlite: bool) -> bool:
    """Is `error` an outage of the database (retry the same work later) rather than a fault of
    the unit being applied (fail that unit alone)?"""
    if isinstance(error, (StoreUnreachable, StoreLockLost)):
        return True
    if isinstance(error, DBAPIError):
        if error.connection_invalidated:
            return True
        orig = error.orig
        if sqlite:
            code = getattr(orig, "sqlite_errorcode", None)
            if code is not None:
                return (code & 0xFF) in _SQLITE_OUTAGE_CODES
            text = str(orig).lower()
            return isinstance(error, OperationalError) and any(
                word in text for word in ("locked", "busy", "disk i/o", "unable to open", "full"))
        if isinstance(error, InterfaceError):
            return True  # the connection is closed or broken
        sqlstate = getattr(orig, "sqlstate", None)
        if sqlstate is None:
            # No answer from the server at all (connection lost mid-statement, connect failed).
            return isinstance(error, OperationalError)
        return sqlstate[:2] in _PG_OUTAGE_CLASSES
    return isinstance(error, (ConnectionError, TimeoutError))


def cause(error: BaseException) -> str:
    if isinstance(error, DBAPIError) and error.orig is not None:
        return one_line(error.orig)
    return one_line(error)
