"""AMQP values with their type names, for the data pipeline.

`broker.protocol.codec` decodes byte, short, int and long alike to a Python int, which is all
routing needs. The pipeline must tell them apart (`property_types`, and a write must send an INT
column as an AMQP int, not a long), so this module reads each map entry's type code itself and
has the matching encoder. Values themselves are still decoded by the codec.

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

from hermod.broker.protocol import codec

TYPE_NAMES: dict[int, str] = {
    0x40: "null", 0x41: "boolean", 0x42: "boolean", 0x56: "boolean",
    0x50: "ubyte", 0x51: "byte", 0x60: "ushort", 0x61: "short",
    0x70: "uint", 0x52: "uint", 0x43: "uint", 0x71: "int", 0x54: "int",
    0x80: "ulong", 0x53: "ulong", 0x44: "ulong", 0x81: "long", 0x55: "long",
    0x72: "float", 0x82: "double", 0x73: "char", 0x83: "timestamp", 0x98: "uuid",
    0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128",
    0xA0: "binary", 0xB0: "binary", 0xA1: "string", 0xB1: "string", 0xA3: "symbol", 0xB3: "symbol",
    0x45: "list", 0xC0: "list", 0xD0: "list", 0xC1: "map", 0xD1: "map", 0xE0: "array", 0xF0: "array",
    0x00: "described",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)


def type_name(buf: bytes, pos: int) -> str:
    return TYPE_NAMES.get(buf[pos], "unknown")


def typed_map(buf: bytes, section_at: int) -> list[tuple[Any, str, Any]]:
    """(key, AMQP type name of the value, value) for each entry of the map section that starts
    at `section_at` (a described section: descriptor, then the map). Empty when absent."""
    return [(key, kind, value) for key, kind, value, _text in _entries(buf, section_at, False)]


def typed_text_map(buf: bytes, section_at: int) -> list[tuple[Any, str, str | None]]:
    """(key, type name, text form) for each entry: the pipeline's hot loop, which reads the
    common primitive types straight to text without building typed values first."""
    return [(key, kind, found) for key, kind, _value, found in _entries(buf, section_at, True)]


def _entries(buf: bytes, section_at: int, as_text: bool) -> list[tuple]:
    if section_at < 0:
        return []
    p = section_at + 3 if buf[section_at + 1] == 0x53 else codec.skip(buf, section_at + 1)
    code = buf[p]
    if code == 0xC1:
        count, p = buf[p + 2], p + 3
    elif code == 0xD1:
        count, p = struct.unpack_from(">I", buf, p + 5)[0], p + 9
    else:
        return []
    entries = []
    decode, names, readers = codec.decode, TYPE_NAMES, _TEXT_READERS
    for _ in range(count // 2):
        if buf[p] == 0xA1:  # the usual key: a short string
            n = buf[p + 1]
            key, p = buf[p + 2:p + 2 + n].decode(), p + 2 + n
        else:
            key, p = decode(buf, p)
        code = buf[p]
        kind = names.get(code, "unknown")
        reader = readers[code] if as_text else None
        if reader is not None:
            found, p = reader(buf, p + 1)
            entries.append((key, kind, None, found))
        else:
            value, p = decode(buf, p)
            entries.append((key, kind, value, text(kind, value) if as_text else None))
    return entries


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


def _text_reader(width: int, fmt: str | None, form):
    unpack = struct.Struct(fmt).unpack_from if fmt else None

    def read(buf: bytes, p: int) -> tuple[str, int]:
        value = unpack(buf, p)[0] if unpack else buf[p]
        return form(value), p + width
    return read


def _str_reader(size_width: int):
    def read(buf: bytes, p: int) -> tuple[str, int]:
        n = buf[p] if size_width == 1 else struct.unpack_from(">I", buf, p)[0]
        start = p + size_width
        return buf[start:start + n].decode(), start + n
    return read


# Type code -> reader of the value's text form (position after the code in, text and the
# position after the value out); None: decode the value, then `text`.
_TEXT_READERS: list = [None] * 256
_TEXT_READERS[0x40] = lambda buf, p: (None, p)
_TEXT_READERS[0x41] = lambda buf, p: ("true", p)
_TEXT_READERS[0x42] = lambda buf, p: ("false", p)
_TEXT_READERS[0x56] = lambda buf, p: ("true" if buf[p] else "false", p + 1)
_TEXT_READERS[0x43] = _TEXT_READERS[0x44] = lambda buf, p: ("0", p)
_TEXT_READERS[0x50] = _TEXT_READERS[0x52] = _TEXT_READERS[0x53] = _text_reader(1, None, str)
_TEXT_READERS[0x51] = _TEXT_READERS[0x54] = _TEXT_READERS[0x55] = _text_reader(1, ">b", str)
_TEXT_READERS[0x60] = _text_reader(2, ">H", str)
_TEXT_READERS[0x61] = _text_reader(2, ">h", str)
_TEXT_READERS[0x70] = _text_reader(4, ">I", str)
_TEXT_READERS[0x71] = _text_reader(4, ">i", str)
_TEXT_READERS[0x80] = _text_reader(8, ">Q", str)
_TEXT_READERS[0x81] = _text_reader(8, ">q", str)
_TEXT_READERS[0x72] = _text_reader(4, ">f", lambda v: float_text(v, single=True))
_TEXT_READERS[0x82] = _text_reader(8, ">d", float_text)
_TEXT_READERS[0x83] = _text_reader(8, ">q", timestamp_text)
_TEXT_READERS[0xA1] = _TEXT_READERS[0xA3] = _str_reader(1)
_TEXT_READERS[0xB1] = _TEXT_READERS[0xB3] = _str_reader(4)


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

_INT_CODES = {"byte": (0x51, ">b"), "short": (0x61, ">h"), "int": (0x71, ">i"), "long": (0x81, ">q"),
              "ubyte": (0x50, ">B"), "ushort": (0x60, ">H"), "uint": (0x70, ">I"),
              "ulong": (0x80, ">Q")}


def encode_typed(kind: str, value: Any) -> bytes:
    """One value encoded as the named AMQP type (`value` already of a fitting Python type;
    timestamps as epoch ms)."""
    if value is None or kind == "null":
        return b"\x40"
    found = _INT_CODES.get(kind)
    if found is not None:
        code, fmt = found
        return bytes((code,)) + struct.pack(fmt, int(value))
    if kind == "boolean":
        return b"\x41" if value else b"\x42"
    if kind == "float":
        return b"\x72" + struct.pack(">f", float(value))
    if kind == "double":
        return b"\x82" + struct.pack(">d", float(value))
    if kind == "timestamp":
        return b"\x83" + struct.pack(">q", int(value))
    if kind == "symbol":
        return codec.encode(codec.Symbol(value))
    if kind == "char":
        return codec.encode(codec.Char(value))
    if kind == "uuid":
        return b"\x98" + (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    if kind == "binary":
        return codec.encode(bytes(value))
    return codec.encode(str(value))


def parse_text(kind: str, value: str | None) -> Any:
    """The inverse of `text` for the primitive types: a typed value from its text form."""
    if value is None or kind == "null":
        return None
    if kind in _INT_CODES:
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
    parts = [codec.encode(str(key)) + encode_typed(kind, value) for key, kind, value in entries]
    body = b"".join(parts)
    count = len(parts) * 2
    if len(body) + 1 < 256 and count < 256:
        return bytes((0xC1, len(body) + 1, count)) + body
    return b"\xd1" + struct.pack(">II", len(body) + 4, count) + body
