"""The AMQP 1.0 type system (spec section 1.6), the subset a broker needs, in plain Python:
decode a value from encoded bytes, skip one without decoding it, encode one. No Proton.

Decoding is table-driven (one small function per type code, found by indexing a list), which
is several times cheaper in CPython than a chain of comparisons.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

class DecodeError(ValueError):
    """The bytes are not a well-formed AMQP message."""


# What Python raises on bytes that are not AMQP: read past the end, a bad UTF-8 string, a char
# out of range, a list or map used as a map key, lists nested too deep. The decoding entry points turn each into a
# DecodeError, so a malformed message is refused, never an error of the broker.
MALFORMED = (IndexError, struct.error, UnicodeDecodeError, TypeError, ValueError, OverflowError,
             RecursionError)


# -- value types that plain Python types cannot tell apart ---------------------------------------
# They subclass str/int so that they print and compare naturally; the selector treats any
# subclass as opaque (a symbol never equals a string literal), as Artemis does.


class Symbol(str):
    __slots__ = ()


class Char(str):
    __slots__ = ()


class Timestamp(int):
    """Milliseconds since the epoch."""

    __slots__ = ()


class UByte(int):
    __slots__ = ()


class Byte(int):
    __slots__ = ()


class UInt(int):
    __slots__ = ()


class ULong(int):
    __slots__ = ()


class Described:
    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: Any, value: Any):
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Described) and (self.descriptor, self.value) == (other.descriptor, other.value)

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


# -- skipping -----------------------------------------------------------------------------------

_FIXED_WIDTH = {0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0}
_FIXED_WIDTH.update({c: 1 for c in range(0x50, 0x57)})
_FIXED_WIDTH.update({0x60: 2, 0x61: 2})
_FIXED_WIDTH.update({c: 4 for c in range(0x70, 0x75)})
_FIXED_WIDTH.update({c: 8 for c in range(0x80, 0x85)})
_FIXED_WIDTH.update({0x94: 16, 0x98: 16})
_SIZE8 = frozenset((0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0))
_SIZE32 = frozenset((0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0))

_u16 = struct.Struct(">H").unpack_from
_i16 = struct.Struct(">h").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i32 = struct.Struct(">i").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from


def skip(buf: bytes, pos: int) -> int:
    """The position just after the value that starts at `pos`."""
    try:
        code = buf[pos]
        if code == 0x00:
            return skip(buf, skip(buf, pos + 1))
        width = _FIXED_WIDTH.get(code)
        if width is not None:
            end = pos + 1 + width
        elif code in _SIZE8:
            end = pos + 2 + buf[pos + 1]
        elif code in _SIZE32:
            end = pos + 5 + _u32(buf, pos + 1)[0]
        else:
            raise DecodeError(f"unknown AMQP type code 0x{code:02x} at {pos}")
    except DecodeError:
        raise
    except MALFORMED:
        raise DecodeError(f"truncated AMQP value at {pos}") from None
    if end > len(buf):
        raise DecodeError(f"truncated AMQP value at {pos}")
    return end


# -- decoding -----------------------------------------------------------------------------------


def decode(buf: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode one value; returns (value, position after it)."""
    try:
        return _decode(buf, pos)
    except DecodeError:
        raise
    except MALFORMED:
        raise DecodeError(f"malformed AMQP value at {pos}") from None


def _decode(buf: bytes, pos: int) -> tuple[Any, int]:
    decoder = _DECODERS[buf[pos]]
    if decoder is None:
        raise DecodeError(f"unknown AMQP type code 0x{buf[pos]:02x} at {pos}")
    return decoder(buf, pos + 1)


# One small function per type code, found by indexing a table: much cheaper in CPython than a
# chain of comparisons. Each takes the position just after the code byte.

def _const(value):
    return lambda buf, p: (value, p)


def _str8(buf, p):
    n = buf[p]
    return buf[p + 1:p + 1 + n].decode(), p + 1 + n


def _str32(buf, p):
    n = _u32(buf, p)[0]
    return buf[p + 4:p + 4 + n].decode(), p + 4 + n


def _sym8(buf, p):
    n = buf[p]
    return Symbol(buf[p + 1:p + 1 + n].decode("ascii", "replace")), p + 1 + n


def _sym32(buf, p):
    n = _u32(buf, p)[0]
    return Symbol(buf[p + 4:p + 4 + n].decode("ascii", "replace")), p + 4 + n


def _bin8(buf, p):
    n = buf[p]
    return bytes(buf[p + 1:p + 1 + n]), p + 1 + n


def _bin32(buf, p):
    n = _u32(buf, p)[0]
    return bytes(buf[p + 4:p + 4 + n]), p + 4 + n


def _ubyte(buf, p):
    return buf[p], p + 1


def _sbyte(buf, p):
    v = buf[p]
    return (v - 256 if v > 127 else v), p + 1


def _struct(unpack, width, wrap=None):
    if wrap is None:
        return lambda buf, p: (unpack(buf, p)[0], p + width)
    return lambda buf, p: (wrap(unpack(buf, p)[0]), p + width)


def _decode_compound(buf, p, code):
    if code < 0xD0:
        size, count, p = buf[p], buf[p + 1], p + 2
        end = p + size - 1
    else:
        size, count = _u32(buf, p)[0], _u32(buf, p + 4)[0]
        p += 8
        end = p + size - 4
    items = []
    append = items.append
    decoders = _DECODERS
    for _ in range(count):
        decoder = decoders[buf[p]]
        if decoder is None:
            raise DecodeError(f"unknown AMQP type code 0x{buf[p]:02x} at {p}")
        v, p = decoder(buf, p + 1)
        append(v)
    if p != end:
        raise DecodeError(f"compound value size mismatch at {p}")
    return items, end


def _list(code):
    return lambda buf, p: _decode_compound(buf, p, code)


def _map(code):
    def decode_map(buf, p):
        items, end = _decode_compound(buf, p, code)
        return _to_map(items), end
    return decode_map


def _described(buf, p):
    descriptor, p = _decode(buf, p)
    value, p = _decode(buf, p)
    return Described(descriptor, value), p


def _decimal(width):
    return lambda buf, p: (bytes(buf[p:p + width]), p + width)


_DECODERS: list = [None] * 256
_DECODERS[0x00] = _described
_DECODERS[0x40] = _const(None)
_DECODERS[0x41] = _const(True)
_DECODERS[0x42] = _const(False)
_DECODERS[0x43] = _const(0)
_DECODERS[0x44] = _const(0)
_DECODERS[0x45] = lambda buf, p: ([], p)
_DECODERS[0x50] = _ubyte
_DECODERS[0x51] = _sbyte
_DECODERS[0x52] = _ubyte
_DECODERS[0x53] = _ubyte
_DECODERS[0x54] = _sbyte
_DECODERS[0x55] = _sbyte
_DECODERS[0x56] = lambda buf, p: (buf[p] != 0, p + 1)
_DECODERS[0x60] = _struct(_u16, 2)
_DECODERS[0x61] = _struct(_i16, 2)
_DECODERS[0x70] = _struct(_u32, 4)
_DECODERS[0x71] = _struct(_i32, 4)
_DECODERS[0x72] = _struct(_f32, 4)
_DECODERS[0x73] = _struct(_u32, 4, lambda v: Char(chr(v)))
_DECODERS[0x74] = _decimal(4)
_DECODERS[0x80] = _struct(_u64, 8)
_DECODERS[0x81] = _struct(_i64, 8)
_DECODERS[0x82] = _struct(_f64, 8)
_DECODERS[0x83] = _struct(_i64, 8, Timestamp)
_DECODERS[0x84] = _decimal(8)
_DECODERS[0x94] = _decimal(16)
_DECODERS[0x98] = lambda buf, p: (uuid.UUID(bytes=bytes(buf[p:p + 16])), p + 16)
_DECODERS[0xA0] = _bin8
_DECODERS[0xA1] = _str8
_DECODERS[0xA3] = _sym8
_DECODERS[0xB0] = _bin32
_DECODERS[0xB1] = _str32
_DECODERS[0xB3] = _sym32
for _code in (0xC0, 0xD0):
    _DECODERS[_code] = _list(_code)
for _code in (0xC1, 0xD1):
    _DECODERS[_code] = _map(_code)
_DECODERS[0xE0] = lambda buf, p: _decode_array(buf, p - 1, 0xE0)
_DECODERS[0xF0] = lambda buf, p: _decode_array(buf, p - 1, 0xF0)


def _payload_length(buf: bytes, p: int, ctor: int) -> int:
    width = _FIXED_WIDTH.get(ctor)
    if width is not None:
        return width
    if ctor in _SIZE8:
        return 1 + buf[p]
    if ctor in _SIZE32:
        return 4 + _u32(buf, p)[0]
    raise DecodeError(f"unknown array element type 0x{ctor:02x}")


def _to_map(items: list) -> dict:
    if len(items) % 2:
        raise DecodeError("map with an odd number of items")
    it = iter(items)
    out = {}
    for k in it:
        v = next(it)
        try:
            out[k] = v
        except TypeError:  # an unhashable key (a list): keep it findable by its text
            out[repr(k)] = v
    return out


MAX_EMPTY_ELEMENTS = 65536


def _decode_array(buf: bytes, pos: int, code: int) -> tuple[list, int]:
    p = pos + 1
    if code == 0xE0:
        size, count, p = buf[p], buf[p + 1], p + 2
        end = p + size - 1
    else:
        size, count = _u32(buf, p)[0], _u32(buf, p + 4)[0]
        p += 8
        end = p + size - 4
    ctor = buf[p]
    descriptor = None
    if ctor == 0x00:
        descriptor, p = _decode(buf, p + 1)
        ctor = buf[p]
    p += 1
    if end > len(buf):
        raise DecodeError(f"truncated array at {pos}")
    if _FIXED_WIDTH.get(ctor) == 0 and count > MAX_EMPTY_ELEMENTS:
        # Elements of no width (null, true, false, zero) take no bytes, so a few bytes could
        # claim four billion of them: refuse, rather than spend the broker's memory and time.
        raise DecodeError(f"array of {count} empty elements at {pos}")
    items = []
    for _ in range(count):
        # Each element is the constructor's payload: decode it with the constructor in front.
        n = _payload_length(buf, p, ctor)
        value, _ = _decode(bytes((ctor,)) + bytes(buf[p:p + n]), 0)
        p += n
        if p > end:
            raise DecodeError(f"array elements overrun the array at {pos}")
        items.append(Described(descriptor, value) if descriptor is not None else value)
    return items, end


# -- width-preserving decode ----------------------------------------------------------------------
# `decode` returns plain Python values (a ubyte and a long are both an int), which is all routing
# needs. The data pipeline must tell AMQP types apart (`property_types`, a typed write-back), so
# these name the AMQP type of each encoded value from its constructor code.

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


def type_name(buf: bytes, pos: int) -> str:
    """The AMQP type of the value encoded at `pos` (`unknown` for a code outside the spec)."""
    return TYPE_NAMES.get(buf[pos], "unknown")


def decode_typed(buf: bytes, pos: int = 0) -> tuple[str, Any, int]:
    """(AMQP type name, value, position after it) of the value at `pos`."""
    value, end = decode(buf, pos)
    return TYPE_NAMES.get(buf[pos], "unknown"), value, end


def typed_map_entries(buf: bytes, pos: int) -> list[tuple[Any, str, Any]]:
    """(key, AMQP type name of the value, value) of each entry of the map encoded at `pos`;
    empty if the value there is not a map."""
    code = buf[pos]
    if code not in (0xC1, 0xD1):
        return []
    try:
        if code == 0xC1:
            count, p = buf[pos + 2], pos + 3
        else:
            count, p = _u32(buf, pos + 5)[0], pos + 9
        entries = []
        for _ in range(count // 2):
            key, p = _decode(buf, p)
            kind = TYPE_NAMES.get(buf[p], "unknown")
            value, p = _decode(buf, p)
            entries.append((key, kind, value))
    except DecodeError:
        raise
    except MALFORMED:
        raise DecodeError(f"malformed AMQP map at {pos}") from None
    return entries


# -- encoding -----------------------------------------------------------------------------------


def encode(value: Any) -> bytes:
    """Encode one Python value as an AMQP value (types above pick the AMQP type)."""
    if value is None:
        return b"\x40"
    if value is True:
        return b"\x41"
    if value is False:
        return b"\x42"
    if isinstance(value, Symbol):
        raw = value.encode("ascii")
        return (b"\xa3" + bytes((len(raw),)) if len(raw) < 256 else b"\xb3" + struct.pack(">I", len(raw))) + raw
    if isinstance(value, Char):
        return b"\x73" + struct.pack(">I", ord(value))
    if isinstance(value, str):
        raw = value.encode()
        return (b"\xa1" + bytes((len(raw),)) if len(raw) < 256 else b"\xb1" + struct.pack(">I", len(raw))) + raw
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return (b"\xa0" + bytes((len(raw),)) if len(raw) < 256 else b"\xb0" + struct.pack(">I", len(raw))) + raw
    if isinstance(value, Timestamp):
        return b"\x83" + struct.pack(">q", value)
    if isinstance(value, UByte):
        return b"\x50" + bytes((value,))
    if isinstance(value, Byte):
        return b"\x51" + struct.pack(">b", value)
    if isinstance(value, UInt):
        return b"\x70" + struct.pack(">I", value)
    if isinstance(value, ULong):
        return b"\x80" + struct.pack(">Q", value)
    if isinstance(value, int):
        return b"\x81" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"\x82" + struct.pack(">d", value)
    if isinstance(value, uuid.UUID):
        return b"\x98" + value.bytes
    if isinstance(value, dict):
        return _compound(0xC1, 0xD1, [encode(x) for kv in value.items() for x in kv])
    if isinstance(value, (list, tuple)):
        return _compound(0xC0, 0xD0, [encode(x) for x in value]) if value else b"\x45"
    if isinstance(value, Described):
        return b"\x00" + encode(value.descriptor) + encode(value.value)
    raise TypeError(f"cannot encode {type(value).__name__} as AMQP")


# AMQP type name -> (constructor code, struct format) of the fixed-width numeric types.
_FIXED_ENCODINGS = {
    "byte": (0x51, ">b"), "short": (0x61, ">h"), "int": (0x71, ">i"), "long": (0x81, ">q"),
    "ubyte": (0x50, ">B"), "ushort": (0x60, ">H"), "uint": (0x70, ">I"), "ulong": (0x80, ">Q"),
    "float": (0x72, ">f"), "double": (0x82, ">d"), "timestamp": (0x83, ">q"),
}
INTEGER_TYPES = frozenset(("byte", "short", "int", "long", "ubyte", "ushort", "uint", "ulong"))


def encode_as(kind: str, value: Any) -> bytes:
    """`value` encoded as the named AMQP type (`value` of a fitting Python type; a timestamp as
    epoch ms); a name outside the primitive types encodes the value's text as a string."""
    if value is None or kind == "null":
        return b"\x40"
    fixed = _FIXED_ENCODINGS.get(kind)
    if fixed is not None:
        code, fmt = fixed
        number = float(value) if kind in ("float", "double") else int(value)
        return bytes((code,)) + struct.pack(fmt, number)
    if kind == "boolean":
        return b"\x41" if value else b"\x42"
    if kind == "symbol":
        return encode(Symbol(value))
    if kind == "char":
        return encode(Char(value))
    if kind == "uuid":
        return encode(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if kind == "binary":
        return encode(bytes(value))
    return encode(str(value))


def encode_typed_map(entries: list[tuple[Any, str, Any]]) -> bytes:
    """An AMQP map from (key, AMQP type name, value) entries; keys as `encode` picks."""
    return _compound(0xC1, 0xD1, [part for key, kind, value in entries
                                  for part in (encode(key), encode_as(kind, value))])


def _compound(code8: int, code32: int, items: list[bytes]) -> bytes:
    body = b"".join(items)
    if len(body) + 1 < 256 and len(items) < 256:
        return bytes((code8, len(body) + 1, len(items))) + body
    return bytes((code32,)) + struct.pack(">II", len(body) + 4, len(items)) + body
