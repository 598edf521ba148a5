"""XA transactions of OpenWire clients (Classic's XAResource over TransactionInfo): a branch is
a core transaction (core/transactions.py) named by its XATransactionId; PREPARE moves it from
its connection into the broker-wide list of prepared branches, where any connection may commit
(two-phase), roll back or RECOVER it, and where it outlives its connection.

Prepared branches are kept in memory only: they survive a dropped connection, not a broker
restart (the store has no prepared-transaction records yet)."""
from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary


XA_OK, XA_RDONLY = 0, 3

_PREPARED: WeakKeyDictionary[Any, dict[Any, Any]] = WeakKeyDictionary()


def prepared(broker) -> dict[Any, Any]:
    """The broker's prepared branches: XATransactionId -> core Transaction."""
    found = _PREPARED.get(broker)
    if found is None:
        found = _PREPARED[broker] = {}
    return found


def is_empty(txn) -> bool:
    return not txn.sends and not txn.acquired


__all__ = ["XA_OK", "XA_RDONLY", "is_empty", "prepared"]
