"""The JSON shapes of the management answers (the contract's HTTP table), and AMQP values made
JSON-able (bytes as text when they are UTF-8, else base64; other non-JSON types as text)."""
from __future__ import annotations

import base64
import math
from typing import Any


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)  # a Symbol or Char is its text
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


def queue_info(q) -> dict:
    return {"name": q.name, "address": q.address.name, "routing_type": q.routing_type,
            "durable": q.durable, "messages": q.message_count, "consumers": len(q.consumers),
            "added": q.added, "acked": q.acked, "filter": q.filter_text, "purpose": q.purpose,
            "delivering": q.delivering, "auto_created": q.auto_created}


def address_info(a) -> dict:
    return {"name": a.name, "routing_types": sorted(a.routing_types), "queues": sorted(a.queues),
            "auto_created": a.auto_created}
