"""Local and XA transactions of an OpenWire connection (a mixin of OpenWireConnection), on the
core's protocol-neutral transactions: BEGIN declares one, sends and acks naming it are held,
COMMIT (one phase, or two phase after PREPARE) applies them as one store unit and is answered
once stored, ROLLBACK drops the sends and leaves acknowledged messages with their consumer (the
client redelivers them itself, as with Classic). XA branches: see xa.py."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...openwire import model
from . import xa
from .commands import LATER
from .errors import JMS, TRANSACTION_ROLLED_BACK, XA, Refusal

BEGIN, PREPARE, COMMIT_ONE_PHASE, COMMIT_TWO_PHASE, ROLLBACK, RECOVER, FORGET, END = range(8)


class TransactionCommands:
    """OpenWireConnection's transaction half (the attributes are the connection's)."""

    broker: Any
    txns: dict[Any, Any]
    transactions: Any
    consumers: dict[Any, Any]

    if TYPE_CHECKING:
        def answer(self, command, exc: BaseException | None = None) -> None: ...
        def _send_answer(self, response: model.DataStructure) -> None: ...

    def _on_transaction(self, info: model.TransactionInfo) -> Any:
        tid = info.transaction_id
        kind = info.type
        if kind == RECOVER:
            ids = tuple(xa.prepared(self.broker))
            self._send_answer(model.DataArrayResponse(correlation_id=info.command_id, data=ids))
            return LATER
        if kind == BEGIN:
            if tid in self.txns or tid in xa.prepared(self.broker):
                raise Refusal(XA if isinstance(tid, model.XATransactionId) else JMS, f"transaction {tid} is already open")
            self.txns[tid] = self.transactions.declare(owner=self, postoffice=self.broker.postoffice)
            return None
        if kind == END:
            return None
        if kind == PREPARE:
            return self._prepare(info)
        if kind == FORGET:
            xa.prepared(self.broker).pop(tid, None)
            return None
        txn = self.txns.pop(tid, None)
        if txn is None and kind in (COMMIT_TWO_PHASE, ROLLBACK):
            txn = xa.prepared(self.broker).pop(tid, None)
        if txn is None:
            if kind == ROLLBACK and not isinstance(tid, model.XATransactionId):
                return None
            raise Refusal(XA if isinstance(tid, model.XATransactionId) else TRANSACTION_ROLLED_BACK,
                          f"unknown transaction {tid}")
        self.transactions.active.pop(txn.id, None)
        if kind == ROLLBACK:
            txn.rollback()
            return None
        self._commit(info, txn)
        return LATER

    def _prepare(self, info: model.TransactionInfo) -> Any:
        tid = info.transaction_id
        if not isinstance(tid, model.XATransactionId):
            raise Refusal(JMS, "PREPARE of a local transaction")
        txn = self.txns.pop(tid, None)
        if txn is None:
            raise Refusal(XA, f"unknown XA transaction {tid}")
        self.transactions.active.pop(txn.id, None)
        if txn.rollback_cause is not None:
            cause = txn.rollback_cause
            txn.rollback()
            raise Refusal(XA, f"rolled back: {cause}")
        if xa.is_empty(txn):
            result = xa.XA_RDONLY
        else:
            xa.prepared(self.broker)[tid] = txn
            result = xa.XA_OK
        self._send_answer(model.IntegerResponse(correlation_id=info.command_id, result=result))
        return LATER

    def _commit(self, info: model.TransactionInfo, txn) -> None:
        def committed(error: BaseException | None) -> None:
            for a in txn.acquired:
                if a.handle is not None and error is None:
                    consumer, mid = a.handle
                    consumer.committed(mid)
            for consumer in self.consumers.values():
                consumer.refill()
            kind = XA if isinstance(info.transaction_id, model.XATransactionId) else TRANSACTION_ROLLED_BACK
            self.answer(info, None if error is None else Refusal(kind, f"commit failed: {error}"))

        txn.commit(self.broker.postoffice, committed)


__all__ = ["TransactionCommands"]
