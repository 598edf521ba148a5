"""The data pipeline's text forms of AMQP values, on the one AMQP type system.

Type names, the width-preserving decode (a ubyte stays a ubyte, a symbol a symbol) and typed
encoding are `broker.protocol.amqptypes` (`TYPE_NAMES`, `typed_map_entries`, `encode_as`); this
module adds what only the pipeline needs: the contract's text form of each value and its inverse.

Text forms follow the contract: strings and symbols as they are, booleans `true`/`false`,
integers in decimal, floats the shortest text that reads back, timestamps ISO 8601 UTC with
milliseconds, uuids canonical, binary as lower-case hex, null as None.
"""
from __future__ import annotations

import math
import struct
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from hermod.broker.protocol import amqptypes, codec
from hermod.broker.protocol.amqptypes import TYPE_NAMES, type_name  # noqa: F401 - this module's names

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)


def typed_map(buf: bytes, section_at: int) -> list[tuple[Any, str, Any]]:
    """(key, AMQP type name of the value, value) for each entry of the map section that starts
    at `section_at` (a described section: descriptor, then the map). Empty when absent."""
    if section_at < 0:
        return []
    value_at = section_at + 3 if buf[section_at + 1] == 0x53 else codec.skip(buf, section_at + 1)
    return amqptypes.typed_map_entries(buf, value_at)


def typed_text_map(buf: bytes, section_at: int) -> list[tuple[Any, str, str | None]]:
    """(key, type name, text form) for each entry of the map section at `section_at`."""
    return [(key, kind, text(kind, value)) for key, kind, value in typed_map(buf, section_at)]


def timestamp_text(ms: int) -> str:
    return (_NAIVE_EPOCH + timedelta(milliseconds=int(ms))).isoformat(timespec="milliseconds") + "Z"


def float_text(value: float, single: bool = False) -> str:
    """The shortest decimal text that reads back to the same value (for a 32-bit float: to the
    same 32-bit float)."""
    if not single or math.isnan(value) or math.isinf(value):
        return repr(float(value))
    packed = struct.pack(">f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack(">f", candidate) == packed:
            return repr(candidate)
    return repr(float(value))


def text(kind: str, value: Any) -> str | None:
    """The contract's text form of a typed value."""
    if value is None:
        return None
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("float", "double"):
        return float_text(value, single=kind == "float")
    if kind == "timestamp":
        return timestamp_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_loose_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_loose_text(k)}: {_loose_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _loose_text(value: Any) -> str:
    """Text of a nested value (inside a list or map), where type codes are not kept."""
    if value is None:
        return "null"
    if isinstance(value, codec.Timestamp):
        return timestamp_text(value)
    if isinstance(value, (bool, int, float, str, bytes, uuid.UUID, list, dict)):
        found = text("", value)
        return "null" if found is None else found
    return str(value)


def id_text(value: Any) -> str | None:
    """message-id (or correlation-id) as text: string, ulong decimal, uuid canonical, binary hex."""
    return None if value is None else text("", value)


# -- encoding -------------------------------------------------------------------------------------


def encode_typed(kind: str, value: Any) -> bytes:
    """One value encoded as the named AMQP type (`amqptypes.encode_as`)."""
    return amqptypes.encode_as(kind, value)


def parse_text(kind: str, value: str | None) -> Any:
    """The inverse of `text` for the primitive types: a typed value from its text form."""
    if value is None or kind == "null":
        return None
    if kind in amqptypes.INTEGER_TYPES:
        return int(value)
    if kind == "boolean":
        return value == "true"
    if kind in ("float", "double"):
        return float(value)
    if kind == "timestamp":
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return round((moment - _EPOCH) / timedelta(milliseconds=1))
    if kind == "uuid":
        return uuid.UUID(value)
    if kind == "binary":
        return bytes.fromhex(value)
    return value


def encode_map(entries: list[tuple[str, str, Any]]) -> bytes:
    """An AMQP map of string keys to typed values: (key, type name, value) per entry."""
    return amqptypes.encode_typed_map([(str(key), kind, value) for key, kind, value in entries])
