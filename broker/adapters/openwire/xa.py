"""XA transactions of OpenWire clients (Classic's XAResource over TransactionInfo): a branch is
a core transaction (core/transactions.py) named by its XATransactionId; PREPARE stores it
(`Transaction.prepare`) and moves it from its connection into the broker-wide prepared
branches (`Broker.prepared`, keyed by `key(xid)`), where any connection may commit (two-phase),
roll back or RECOVER it, and where it outlives its connection and, with a durable store, a
broker restart (the broker restores them at start).

Refusals carry Classic's `xaErrorCode:N` at the end of their message: the client reads the
XAException's error code from there (TransactionContext.toXAException), as it does with
Classic."""
from __future__ import annotations

import struct
from typing import Any

from ...openwire import model

XA_OK, XA_RDONLY = 0, 3
XAER_RMERR, XAER_NOTA, XAER_PROTO, XAER_DUPID = -3, -4, -6, -8

_HEAD = struct.Struct(">iI")


def prepared(broker) -> dict[bytes, Any]:
    """The broker's prepared branches: key(XATransactionId) -> core Transaction."""
    return broker.prepared


def key(xid: model.XATransactionId) -> bytes:
    """The branch id as the store keeps it: format id, then the global transaction id
    (length-prefixed), then the branch qualifier."""
    gtid = xid.global_transaction_id or b""
    return _HEAD.pack(xid.format_id, len(gtid)) + gtid + (xid.branch_qualifier or b"")


def xid_of(stored: bytes) -> model.XATransactionId:
    format_id, length = _HEAD.unpack_from(stored)
    start = _HEAD.size
    return model.XATransactionId(format_id=format_id,
                                 global_transaction_id=stored[start:start + length],
                                 branch_qualifier=stored[start + length:])


def coded(message: str, code: int) -> str:
    """A refusal's message with the error code the client reads from it."""
    return f"{message} xaErrorCode:{code}"


def is_empty(txn) -> bool:
    return not txn.sends and not txn.acquired


__all__ = ["XAER_DUPID", "XAER_NOTA", "XAER_PROTO", "XAER_RMERR", "XA_OK", "XA_RDONLY", "coded",
           "is_empty", "key", "prepared", "xid_of"]
