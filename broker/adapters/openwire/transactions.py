"""Local and XA transactions of an OpenWire connection (a mixin of OpenWireConnection), on the
core's protocol-neutral transactions: BEGIN declares one, sends and acks naming it are held,
COMMIT (one phase, or two phase after PREPARE) applies them as one store unit and is answered
once stored, ROLLBACK drops the sends and leaves acknowledged messages with their consumer (the
client redelivers them itself, as with Classic). XA branches: see xa.py."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...openwire import model
from . import xa
from .commands import LATER
from .errors import JMS, TRANSACTION_ROLLED_BACK, XA, Refusal

log = logging.getLogger(__name__)

BEGIN, PREPARE, COMMIT_ONE_PHASE, COMMIT_TWO_PHASE, ROLLBACK, RECOVER, FORGET, END = range(8)


class TransactionCommands:
    """OpenWireConnection's transaction half (the attributes are the connection's)."""

    broker: Any
    txns: dict[Any, Any]
    transactions: Any
    consumers: dict[Any, Any]
    loop: Any
    _txn_timer: Any = None

    if TYPE_CHECKING:
        def answer(self, command, exc: BaseException | None = None) -> None: ...
        def _send_answer(self, response: model.DataStructure) -> None: ...

    def _on_transaction(self, info: model.TransactionInfo) -> Any:
        tid = info.transaction_id
        kind = info.type
        branches = xa.prepared(self.broker)
        is_xa = isinstance(tid, model.XATransactionId)
        if kind == RECOVER:
            ids = tuple(xa.xid_of(k) for k in branches)
            self._send_answer(model.DataArrayResponse(correlation_id=info.command_id, data=ids))
            return LATER
        if kind == BEGIN:
            if tid in self.txns or (isinstance(tid, model.XATransactionId) and xa.key(tid) in branches):
                raise Refusal(XA if is_xa else JMS, xa.coded(f"transaction {tid} is already open", xa.XAER_DUPID)
                              if is_xa else f"transaction {tid} is already open")
            txn = self.txns[tid] = self.transactions.declare(owner=self, postoffice=self.broker.postoffice)
            txn.declared_at = self.loop.time()
            self._arm_timeout()
            return None
        if kind == END:
            return None
        if kind == PREPARE:
            return self._prepare(info)
        txn = self.txns.pop(tid, None)
        if txn is None and isinstance(tid, model.XATransactionId) and kind in (COMMIT_TWO_PHASE, ROLLBACK, FORGET):
            txn = branches.pop(xa.key(tid), None)
        if txn is None:
            if kind == FORGET or (kind == ROLLBACK and not is_xa):
                return None
            if is_xa:
                raise Refusal(XA, xa.coded(f"unknown transaction {tid}", xa.XAER_NOTA))
            raise Refusal(TRANSACTION_ROLLED_BACK, f"unknown transaction {tid}")
        self.transactions.active.pop(txn.id, None)
        if kind in (ROLLBACK, FORGET):
            if txn.xid is None:
                txn.rollback()
                return None
            self._abort(info, txn)
            return LATER
        self._commit(info, txn)
        return LATER

    def _arm_timeout(self) -> None:
        """One timer per connection, at the oldest active transaction's deadline."""
        timeout = self.broker.config.server.transaction_timeout_s
        if timeout <= 0 or getattr(self, "_txn_timer", None) is not None or not self.txns:
            return
        oldest = min(t.declared_at for t in self.txns.values())
        self._txn_timer = self.loop.call_at(oldest + timeout, self._time_out)

    def _time_out(self) -> None:
        """The transaction timeout ([server] transaction_timeout_s) rolls back a transaction
        still active, as Classic and Artemis do; never a prepared one, which waits for its
        coordinator's decision however long. A later COMMIT or send naming it is refused as
        unknown."""
        self._txn_timer = None
        timeout = self.broker.config.server.transaction_timeout_s
        now = self.loop.time()
        expired = [(tid, t) for tid, t in self.txns.items() if now - t.declared_at >= timeout]
        for tid, txn in expired:
            del self.txns[tid]
            if self.transactions.time_out(txn):
                log.warning("openwire transaction %s timed out after %g s and was rolled back",
                            tid, timeout)
        if expired:
            for consumer in self.consumers.values():
                consumer.refill()
        self._arm_timeout()

    def _abort(self, info: model.TransactionInfo, txn) -> None:
        """Roll back a prepared branch: answered once the store has forgotten it (if it cannot,
        the branch stays prepared and the client is told)."""
        def aborted(error: BaseException | None) -> None:
            if error is not None:
                xa.prepared(self.broker)[txn.xid] = txn
            for consumer in self.consumers.values():
                consumer.refill()
            self.answer(info, None if error is None else Refusal(
                XA, xa.coded(f"rollback failed: {error}", xa.XAER_RMERR)))

        txn.abort(aborted)

    def _prepare(self, info: model.TransactionInfo) -> Any:
        tid = info.transaction_id
        if not isinstance(tid, model.XATransactionId):
            raise Refusal(JMS, "PREPARE of a local transaction")
        txn = self.txns.pop(tid, None)
        if txn is None:
            raise Refusal(XA, xa.coded(f"unknown XA transaction {tid}", xa.XAER_NOTA))
        self.transactions.active.pop(txn.id, None)
        if txn.rollback_cause is not None:
            cause = txn.rollback_cause
            txn.rollback()
            raise Refusal(XA, xa.coded(f"rolled back: {cause}", xa.XAER_RMERR))
        if xa.is_empty(txn):
            self._send_answer(model.IntegerResponse(correlation_id=info.command_id, result=xa.XA_RDONLY))
            return LATER
        branch = xa.key(tid)

        def stored(error: BaseException | None) -> None:
            if error is not None:
                txn.rollback()
                self.answer(info, Refusal(XA, xa.coded(f"prepare failed: {error}", xa.XAER_RMERR)))
                return
            xa.prepared(self.broker)[branch] = txn
            self._send_answer(model.IntegerResponse(correlation_id=info.command_id, result=xa.XA_OK))

        txn.prepare(branch, stored)
        return LATER

    def _commit(self, info: model.TransactionInfo, txn) -> None:
        def committed(error: BaseException | None) -> None:
            if error is not None and txn.xid is not None and txn.state == txn.ACTIVE:
                xa.prepared(self.broker)[txn.xid] = txn  # the store still has it prepared
            for a in txn.acquired:
                if a.handle is not None and error is None:
                    consumer, mid = a.handle
                    consumer.committed(mid)
            for consumer in self.consumers.values():
                consumer.refill()
            if isinstance(info.transaction_id, model.XATransactionId):
                refusal = Refusal(XA, xa.coded(f"commit failed: {error}", xa.XAER_RMERR))
            else:
                refusal = Refusal(TRANSACTION_ROLLED_BACK, f"commit failed: {error}")
            self.answer(info, None if error is None else refusal)

        txn.commit(self.broker.postoffice, committed)


__all__ = ["TransactionCommands"]
