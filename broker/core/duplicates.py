"""Duplicate detection by `_AMQ_DUPL_ID`: a bounded cache of the ids seen per address. A message
whose id is in the cache is accepted and dropped, so a resend after a producer reconnects does
not deliver twice. The ids are persisted with the message they came with (same journal unit)."""
from __future__ import annotations

from collections import OrderedDict

DUPLICATE_ID = "_AMQ_DUPL_ID"
CACHE_SIZE = 20_000  # ids remembered per address (Artemis: id-cache-size)


class DuplicateIds:
    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._seen: dict[str, OrderedDict] = {}

    @staticmethod
    def id_of(message) -> str | None:
        """The message's duplicate id, or None. The application properties are decoded only
        when their bytes mention the name: most messages pay one substring search."""
        if message.envelope.app_properties_at < 0 or DUPLICATE_ID.encode() not in message.encoded:
            return None
        value = message.application_properties.get(DUPLICATE_ID)
        if value is None:
            return None
        return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)

    def seen(self, address: str, duplicate_id: str) -> bool:
        ids = self._seen.get(address)
        return ids is not None and duplicate_id in ids

    def remember(self, address: str, duplicate_id: str) -> None:
        ids = self._seen.setdefault(address, OrderedDict())
        ids[duplicate_id] = None
        ids.move_to_end(duplicate_id)
        while len(ids) > self.size:
            ids.popitem(last=False)

    def forget(self, address: str, duplicate_id: str) -> None:
        ids = self._seen.get(address)
        if ids is not None:
            ids.pop(duplicate_id, None)

    def load(self, recovered: dict[str, list[str]]) -> None:
        for address, ids in recovered.items():
            for duplicate_id in ids:
                self.remember(address, duplicate_id)
