"""Address settings: every `[[address_settings]]` entry whose `match` pattern matches an address
applies, and for each setting the most specific matching entry that sets it wins."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from . import wildcards

FULL_POLICIES = ("page", "block", "fail", "drop")
ROUTING_TYPES = ("anycast", "multicast")


@dataclass(frozen=True, slots=True)
class AddressSettings:
    auto_create_addresses: bool = True
    auto_create_queues: bool = True
    auto_delete_queues: bool = True
    auto_delete_addresses: bool = True
    # Hermod's default; Artemis uses multicast, which silently drops messages sent to a name
    # nobody subscribed to yet.
    default_routing_type: str = "anycast"
    dead_letter_address: str = "DLQ"
    expiry_address: str = "ExpiryQueue"
    max_delivery_attempts: int = 10
    redelivery_delay_ms: int = 0
    max_size_bytes: int = -1
    address_full_policy: str = "page"
    retention_days: int = 0


SETTING_NAMES = tuple(f.name for f in fields(AddressSettings))


class SettingsRepository:
    """Resolves the effective settings of an address; results are cached per address."""

    def __init__(self, entries: list[tuple[str, dict]] | None = None):
        # Least specific first, so that later (more specific) entries override.
        self._entries = sorted(entries or [], key=lambda e: wildcards.specificity(e[0]))
        self._cache: dict[str, AddressSettings] = {}

    def for_address(self, address: str) -> AddressSettings:
        found = self._cache.get(address)
        if found is None:
            merged: dict = {}
            for pattern, values in self._entries:
                if wildcards.matches(pattern, address):
                    merged.update(values)
            found = replace(_DEFAULTS, **merged) if merged else _DEFAULTS
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[address] = found
        return found


_DEFAULTS = AddressSettings()
