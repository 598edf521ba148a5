"""Typed store errors. Every message is one line: the CLI prints `str(error)` and exits 2."""
from __future__ import annotations


def one_line(text: object) -> str:
    """Collapse a (possibly multi-line, driver-formatted) message into one readable line."""
    words = " ".join(str(text).split())
    return words or type(text).__name__


class StoreError(Exception):
    """Base of every error the store raises or hands to a `done` callback."""

    def __init__(self, message: object) -> None:
        super().__init__(one_line(message))


class StoreUnreachable(StoreError):
    """The database cannot be reached (server down, wrong host, file not openable)."""


class SchemaError(StoreError):
    """The schema cannot be used as it is."""


class SchemaCorrupt(SchemaError):
    """Not a database, or tables that do not match the recorded revision."""


class SchemaTooNew(SchemaError):
    """The database was upgraded by a newer Hermod: a revision this code does not know."""


class SchemaOutdated(SchemaError):
    """The schema is behind the newest revision (run `hermod db upgrade`)."""


class StoreUnavailable(StoreError):
    """A unit of work waited longer than `fail_after_s` for an unreachable database.
    Nothing of the unit was applied."""


class StoreClosed(StoreError):
    """Work submitted after `close()`."""


class UnknownQueue(StoreError):
    """An operation names a queue the store has no row for."""


class UnknownMessage(StoreError):
    """A reference to a message the store does not hold (what a foreign key refused before
    revision 0005)."""
