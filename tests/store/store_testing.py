"""Helpers for the store tests: records, and a recorder of completions that waits with a bound."""
from __future__ import annotations

import threading
import time
from typing import Callable

from hermod.broker.core.ports import (
    AddMessage,
    AddReference,
    AddressRecord,
    MessageRecord,
    PutAddress,
    PutQueue,
    QueueRecord,
)

WAIT_S = 20.0


def message(message_id: int, address: str = "orders", body: bytes | None = None,
            **fields) -> MessageRecord:
    encoded = body if body is not None else f"message {message_id}".encode()
    return MessageRecord(id=message_id, address=address, encoded=encoded, **fields)


def queue(name: str, address: str | None = None, routing_type: str = "anycast",
          **fields) -> QueueRecord:
    return QueueRecord(name=name, address=address or name, routing_type=routing_type, **fields)


def setup_ops(*queues: QueueRecord) -> list:
    """PutAddress + PutQueue for each queue's address and the queue itself."""
    ops: list = []
    seen: set[str] = set()
    for q in queues:
        if q.address not in seen:
            seen.add(q.address)
            ops.append(PutAddress(AddressRecord(q.address, frozenset({q.routing_type}))))
        ops.append(PutQueue(q))
    return ops


def send(message_id: int, *queue_names: str, address: str = "orders", **fields) -> list:
    """The unit a producer's durable message becomes: the message once, a reference per queue."""
    return [AddMessage(message(message_id, address, **fields)),
            *(AddReference(q, message_id) for q in queue_names)]


class Completions:
    """Collects `done` calls (from any thread) in the order they happen."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.calls: list[tuple[object, object]] = []

    def done(self, tag: object) -> Callable[[object], None]:
        def record(result: object) -> None:
            with self._cond:
                self.calls.append((tag, result))
                self._cond.notify_all()
        return record

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[tuple[object, object]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.calls) >= count, timeout):
                raise AssertionError(f"{len(self.calls)} completions after {timeout} s, "
                                     f"expected {count}")
            return list(self.calls)

    def count(self) -> int:
        with self._cond:
            return len(self.calls)


def held_post(timeout: float = WAIT_S) -> tuple[Callable, threading.Event, threading.Event]:
    """A journal `post` that holds the writer after its first commit until `release` is set
    (`entered` says it is held), so that everything submitted meanwhile goes into one group
    commit. Returns (post, entered, release)."""
    entered, release = threading.Event(), threading.Event()

    def post(callback, *args):
        if not entered.is_set():
            entered.set()
            release.wait(timeout)
        callback(*args)

    return post, entered, release


def submit_and_wait(journal, ops: list, timeout: float = WAIT_S) -> object:
    """Submit one unit and return what its `done` got."""
    completions = Completions()
    journal.submit(ops, completions.done(None))
    return completions.wait_for(1, timeout)[0][1]


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT_S,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)


def table_counts(engine) -> dict[str, int]:
    from sqlalchemy import func, select

    from hermod.store.models import addresses, message_refs, messages, queues

    with engine.connect() as connection:
        return {table.name: connection.execute(select(func.count()).select_from(table)).scalar()
                for table in (addresses, queues, messages, message_refs)}


class Turn:
    """A reactor's `call_soon` for the journal's `defer`: what it schedules runs at `end()`."""

    def __init__(self) -> None:
        self.scheduled: list = []

    def defer(self, fn) -> None:
        self.scheduled.append(fn)

    def end(self) -> None:
        scheduled, self.scheduled = self.scheduled, []
        for fn in scheduled:
            fn()
