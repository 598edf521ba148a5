"""Who may do what on which address: `[[security.permission]]` entries.

For each operation the most specific entry whose `match` covers the address decides, alone
(Artemis's rule: nothing is merged from less specific entries, which is how a narrower entry
denies what a broader one allows). An address no entry matches allows nothing. With no entry at
all, everything is allowed (the embedded default). Patterns use the one wildcard matcher of
core/wildcards.py, and "more specific" is its `specificity` order; equally specific entries are
taken in file order.
"""
from __future__ import annotations

from ..core import wildcards

OPERATIONS = ("send", "consume", "browse", "create_address", "create_durable_queue", "delete_queue",
              "manage")
_CACHE_LIMIT = 8192  # (operation, address) decisions remembered; bounded, cleared when full


class Permissions:
    def __init__(self, entries: tuple[dict, ...] | list[dict]):
        self.enabled = bool(entries)
        # Most specific first; sorted() is stable, so file order breaks ties.
        self._entries = sorted(entries, key=lambda e: wildcards.specificity(e["match"]), reverse=True)
        self._cache: dict[tuple[str, str], frozenset[str]] = {}

    def roles_for(self, operation: str, address: str) -> frozenset[str]:
        """The roles the deciding entry grants `operation` on `address` (empty: nobody)."""
        key = (operation, address)
        roles = self._cache.get(key)
        if roles is None:
            roles = frozenset()
            for entry in self._entries:
                if wildcards.matches(entry["match"], address):
                    roles = frozenset(entry.get(operation, ()))
                    break
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = roles
        return roles

    def grants_anywhere(self, roles: frozenset[str], operation: str) -> bool:
        """Some entry grants `operation` to one of `roles` (broker-wide operations: HTTP)."""
        if not self.enabled:
            return True
        return any(not roles.isdisjoint(e.get(operation, ())) for e in self._entries)

    def grants_on_everything(self, roles: frozenset[str], operation: str) -> bool:
        """An entry whose `match` is `#` (or `>`) grants `operation` to one of `roles`: the
        broker-wide operations (connections, metrics) need this, not a grant on some address."""
        if not self.enabled:
            return True
        return any(e["match"] in ("#", ">") and not roles.isdisjoint(e.get(operation, ()))
                   for e in self._entries)

    def allows(self, roles: frozenset[str], operation: str, address: str) -> bool:
        if not self.enabled:
            return True
        return not roles.isdisjoint(self.roles_for(operation, address))
