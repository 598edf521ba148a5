"""BEGIN / COMMIT / ABORT on `core.transactions`: a SEND or ACK naming a transaction is held by it
(the send routed and counted, put on its queues at commit; the acknowledged message taken from
its consumer and removed at commit) in one journal unit; ABORT (or the connection's end, or the
transaction timeout) drops the sends and gives the acknowledged messages back, counted as a
failed attempt (Artemis). COMMIT's RECEIPT is written once the unit is stored."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ...core import errors
from ...core.transactions import Transaction, Transactions, UnknownTransaction
from ...stomp import Frame, StompError
from .answers import HANDLED

if TYPE_CHECKING:
    from .connection import StompConnection

log = logging.getLogger("hermod.stomp")

MAX_OPEN = 100  # open transactions per connection


class StompTransactions:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.core = Transactions()
        self.by_name: dict[str, Transaction] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}

    def named(self, name: str | None) -> Transaction | None:
        """The open transaction a frame's `transaction` header names (None: no header)."""
        if name is None:
            return None
        txn = self.by_name.get(name)
        if txn is None:
            raise UnknownTransaction(f"no open transaction {name!r} on this connection")
        return txn

    def _name(self, frame: Frame) -> str:
        name = frame.header("transaction")
        if not name:
            raise StompError(f"{frame.command} needs a transaction header")
        return name

    def begin(self, frame: Frame) -> None:
        name = self._name(frame)
        if name in self.by_name:
            raise errors.IllegalState(f"transaction {name!r} is already open")
        if len(self.by_name) >= MAX_OPEN:
            raise errors.ResourceLimitExceeded(f"more than {MAX_OPEN} open transactions on one connection")
        conn = self.conn
        txn = self.core.declare(owner=conn, postoffice=conn.broker.postoffice)
        self.by_name[name] = txn
        timeout = conn.broker.config.server.transaction_timeout_s
        if timeout and timeout > 0:
            self.timers[name] = conn.server.loop.call_later(timeout, self._time_out, name)

    def _take(self, frame: Frame) -> Transaction:
        name = self._name(frame)
        txn = self.named(name)
        assert txn is not None
        del self.by_name[name]
        timer = self.timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        self.core.discharge(txn.id)
        return txn

    def commit(self, frame: Frame) -> object:
        conn = self.conn
        txn = self._take(frame)
        slot = conn.answers.reserve()
        receipt = frame.header("receipt")

        def done(error: BaseException | None) -> None:
            if error is not None:
                conn.fail(error, frame, slot)
            else:
                conn.answers.fill(slot, conn.receipt(receipt) if receipt is not None else None)

        txn.commit(conn.broker.postoffice, done)
        return HANDLED

    def abort(self, frame: Frame) -> None:
        self._take(frame).rollback()

    def _time_out(self, name: str) -> None:
        txn = self.by_name.pop(name, None)
        self.timers.pop(name, None)
        if txn is not None and self.core.time_out(txn):
            log.info("STOMP transaction %r of %s rolled back: open longer than the transaction timeout",
                     name, self.conn.peer)

    def rollback_all(self) -> None:
        for name, txn in list(self.by_name.items()):
            try:
                self.core.discharge(txn.id)
                txn.rollback()
            except Exception:  # noqa: BLE001
                log.exception("rolling back STOMP transaction %r", name)
        self.by_name.clear()
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
