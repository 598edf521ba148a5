"""Typed values and the marshalled primitive map and list (`MarshallingSupport` in Classic):
message properties, MapMessage and StreamMessage bodies, the WireFormatInfo options.

Java's types are kept: decoding gives `Byte`, `Short`, `Long`, `Float` and `Char` (subclasses of
int, float and str, so they compare and compute as plain values) for those type codes, and plain
`bool`, `int` (Java int), `float` (Java double), `str`, `bytes`, `dict`, `list` and `None` for the
others. Encoding a plain `int` picks int, or long when it does not fit; a plain `float` is a double.
"""

from __future__ import annotations

from typing import Any

from .errors import OpenWireError, Truncated
from .wire import (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Reader, Writer, decode_mutf8,
                   encode_mutf8, java_char_length)

NULL = 0
BOOLEAN = 1
BYTE = 2
CHAR = 3
SHORT = 4
INTEGER = 5
LONG = 6
DOUBLE = 7
FLOAT = 8
STRING = 9
BYTE_ARRAY = 10
MAP = 11
LIST = 12
BIG_STRING = 13

#: Classic writes strings of at least Short.MAX_VALUE / 4 UTF-16 units in the big form.
BIG_STRING_CHARS = 0x7FFF // 4
#: Nesting of maps and lists inside a property value; Classic has no bound, a stack does.
MAX_DEPTH = 32


class Byte(int):
    """A Java byte."""


class Short(int):
    """A Java short."""


class Long(int):
    """A Java long (a plain int that fits 32 bits encodes as a Java int)."""


class Float(float):
    """A Java float (a plain float encodes as a Java double)."""


class Char(str):
    """A Java char: one UTF-16 code unit."""


def encode_value(w: Writer, value: Any, depth: int = 0) -> None:
    kind = type(value)
    if value is None:
        w.u8(NULL)
    elif kind is bool:
        w.u8(BOOLEAN)
        w.boolean(value)
    elif kind is str:
        if java_char_length(value) < BIG_STRING_CHARS:
            w.u8(STRING)
            w.utf(value)
        else:
            data = encode_mutf8(value)
            w.u8(BIG_STRING)
            w.i32(len(data))
            w.raw(data)
    elif kind is int:
        if INT32_MIN <= value <= INT32_MAX:
            w.u8(INTEGER)
            w.i32(value)
        else:
            _long(w, value)
    elif kind is Long:
        _long(w, value)
    elif kind is float:
        w.u8(DOUBLE)
        w.f64(value)
    elif kind is Float:
        w.u8(FLOAT)
        w.f32(value)
    elif kind is Byte:
        _range(value, -128, 127, "byte")
        w.u8(BYTE)
        w.u8(value)
    elif kind is Short:
        _range(value, -32768, 32767, "short")
        w.u8(SHORT)
        w.i16(value)
    elif kind is Char:
        if len(value) != 1 or ord(value) > 0xFFFF:
            raise OpenWireError(f"char {value!r} is not one UTF-16 code unit")
        w.u8(CHAR)
        w.u16(ord(value))
    elif kind in (bytes, bytearray, memoryview):
        w.u8(BYTE_ARRAY)
        w.i32(len(value))
        w.raw(value)
    elif isinstance(value, dict):
        w.u8(MAP)
        encode_map(w, value, depth + 1)
    elif isinstance(value, (list, tuple)):
        w.u8(LIST)
        encode_list(w, value, depth + 1)
    else:
        raise OpenWireError(f"{kind.__name__} is not an OpenWire primitive")


def _range(v: int, lo: int, hi: int, what: str) -> None:
    if not lo <= v <= hi:
        raise OpenWireError(f"{what} value {v} out of range")


def _long(w: Writer, value: int) -> None:
    _range(value, INT64_MIN, INT64_MAX, "long")
    w.u8(LONG)
    w.i64(value)


def encode_map(w: Writer, values: dict[str, Any] | None, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise OpenWireError("maps and lists nested too deep")
    if values is None:
        w.i32(-1)
        return
    w.i32(len(values))
    for name, value in values.items():
        if type(name) is not str:
            raise OpenWireError(f"map key {name!r} is not a string")
        w.utf(name)
        encode_value(w, value, depth)


def encode_list(w: Writer, values: list[Any] | tuple[Any, ...], depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise OpenWireError("maps and lists nested too deep")
    w.i32(len(values))
    for value in values:
        encode_value(w, value, depth)


def decode_value(r: Reader, depth: int = 0) -> Any:
    code = r.u8()
    if code == STRING:
        return r.utf()
    if code == INTEGER:
        return r.i32()
    if code == BOOLEAN:
        return r.boolean()
    if code == LONG:
        return Long(r.i64())
    if code == NULL:
        return None
    if code == DOUBLE:
        return r.f64()
    if code == BYTE_ARRAY:
        return r.take(r.i32())
    if code == BIG_STRING:
        size = r.i32()
        return None if size == -1 else decode_mutf8(r.take(size))
    if code == BYTE:
        return Byte(r.i8())
    if code == SHORT:
        return Short(r.i16())
    if code == FLOAT:
        return Float(r.f32())
    if code == CHAR:
        return Char(chr(r.u16()))
    if code == MAP:
        return decode_map(r, depth + 1)
    if code == LIST:
        return decode_list(r, depth + 1)
    raise OpenWireError(f"unknown primitive type {code}")


def decode_map(r: Reader, depth: int = 0, max_entries: int | None = None) -> dict[str, Any] | None:
    if depth > MAX_DEPTH:
        raise OpenWireError("maps and lists nested too deep")
    count = r.i32()
    if count < 0:
        return None
    if max_entries is not None and count > max_entries:
        raise OpenWireError(f"primitive map of {count} entries is over the limit of {max_entries}")
    if count * 3 > r.remaining():  # a name's length and a type code at least
        raise OpenWireError(f"primitive map of {count} entries is longer than its command")
    out: dict[str, Any] = {}
    for _ in range(count):
        name = r.utf()
        out[name] = decode_value(r, depth)
    return out


def decode_list(r: Reader, depth: int = 0) -> list[Any]:
    if depth > MAX_DEPTH:
        raise OpenWireError("maps and lists nested too deep")
    count = r.i32()
    if count < 0:
        return []
    if count > r.remaining():  # a type code at least
        raise OpenWireError(f"primitive list of {count} entries is longer than its command")
    return [decode_value(r, depth) for _ in range(count)]


def marshal_map(values: dict[str, Any] | None) -> bytes:
    w = Writer()
    encode_map(w, values)
    return bytes(w.buf)


def unmarshal_map(data: bytes, max_entries: int | None = None) -> dict[str, Any] | None:
    r = Reader(data)
    try:
        return decode_map(r, 0, max_entries)
    except Truncated:
        raise OpenWireError("primitive map ends early") from None
