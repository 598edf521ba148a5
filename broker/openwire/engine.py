"""One loose and one tight engine that marshal any declared type (model.py) for a version.

A type's fields for a version are compiled once into a tuple of (attribute, kind, class); the
engines walk it. Tight encoding writes the boolean stream and the data in one pass (the bits and
the bytes are separate streams, each in field order, which is all Classic's two-pass marshaller
guarantees) and puts the stream in front.

The data-structure cache (`CacheEnabled`): each side keeps, per connection and per direction, a
table of recently sent identifiers and destinations; the first time a value goes out it is sent
in full with the slot it takes, afterwards by its slot number alone. Slots are given out in a ring
and the oldest are forgotten when the table is within 100 of full, as Classic's writer does, so a
Java reader sized by the negotiated `CacheSize` always finds them. Nulls take slots too (Classic
caches them), and a reference to a slot never written reads as null, as in Classic.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from . import model
from .errors import OpenWireError, Truncated
from .model import (ARRAY, BOOL, BYTE, BYTES, CACHED, INT, LONG, MAGIC, NESTED, PROPERTIES,
                    STRING, THROWABLE, DataStructure, StackTraceElement, Throwable)
from .values import decode_map, encode_map
from .wire import (INT64_MAX, INT64_MIN, BitReader, BitWriter, Reader, Writer, decode_mutf8,
                   encode_mutf8)

#: Classic's default when the negotiated `CacheSize` is 0.
DEFAULT_CACHE_SIZE = 0x7FFF // 2
_CACHE_FREE_SPACE = 100
#: Nesting of data structures (a dispatch holding a message holding an advisory's ConsumerInfo...)
#: and of exception causes; deeper input is refused rather than recursed into.
MAX_DEPTH = 16
#: Entries of WireFormatInfo's option map, as Classic bounds them.
MAX_WIREFORMAT_PROPERTIES = 4096
_MAGIC = b"ActiveMQ"
_EMPTY = object()

Spec = tuple[type, tuple[tuple[str, str, Any], ...], tuple[int, ...], tuple[Any, ...]]
_SPECS: dict[tuple[type, int], Spec] = {}


def spec(cls: type, version: int) -> Spec:
    """(class, present fields as (attribute, kind, class), their positions among all fields,
    every field's default) for one type and version."""
    key = (cls, version)
    found = _SPECS.get(key)
    if found is None:
        present, positions, defaults = [], [], []
        for i, f in enumerate(dataclasses.fields(cls)):
            kind, since, of = f.metadata["openwire"]
            defaults.append(f.default)
            if version >= since:
                present.append((f.name, kind, of))
                positions.append(i)
        found = _SPECS[key] = (cls, tuple(present), tuple(positions), tuple(defaults))
    return found


def fields_for(cls: type, version: int) -> list[str]:
    """The attributes `cls` marshals in `version`, in wire order."""
    return [name for name, _, _ in spec(cls, version)[1]]


class Marshaller:
    """Marshals and unmarshals commands for one connection under one negotiated wire format."""

    def __init__(self, version: int = 12, *, tight: bool = False, cache: bool = False,
                 cache_size: int = 1024, stack_trace: bool = False) -> None:
        if version not in model.VERSIONS:
            raise OpenWireError(f"unsupported OpenWire version {version}")
        self.version = version
        self.tight = tight
        self.cache = cache
        self.stack_trace = stack_trace
        size = cache_size if cache_size > 0 else DEFAULT_CACHE_SIZE
        self.cache_size = size
        self._out_slots: list[Any] = [_EMPTY] * size if cache else []
        self._out_index: dict[Any, int] = {}
        self._out_next = 0
        self._out_evict = 0
        self._out_limit = max(size - _CACHE_FREE_SPACE, size // 2)
        self._in_slots: list[Any] = [None] * size if cache else []
        self._depth = 0

    # --- encoding ------------------------------------------------------------------------

    def encode(self, command: DataStructure) -> bytes:
        """The command's bytes after the size prefix: its type code and its body."""
        cls = type(command)
        if model.TYPES.get(getattr(cls, "TYPE", -1)) is not cls:
            raise OpenWireError(f"{cls.__name__} is not an OpenWire type")
        if self.cache:
            self._sweep()
        try:
            if self.tight:
                bits = BitWriter()
                w = Writer()
                self._tight_fields(command, w, bits)
                return bytes((cls.TYPE,)) + bits.marshal() + w.buf
            w = Writer()
            w.u8(cls.TYPE)
            self._loose_fields(command, w)
            return bytes(w.buf)
        except (struct.error, TypeError, AttributeError) as exc:
            raise OpenWireError(f"cannot encode {cls.__name__}: {exc}") from None

    def _sweep(self) -> None:
        index, slots = self._out_index, self._out_slots
        while len(index) > self._out_limit:
            old = slots[self._out_evict]
            if old is not _EMPTY:
                index.pop(old, None)
                slots[self._out_evict] = _EMPTY
            self._out_evict = (self._out_evict + 1) % self.cache_size

    def _cached_index(self, value: Any) -> int | None:
        try:
            return self._out_index.get(value)
        except TypeError:  # a mutable command where an identifier belongs: sent in full
            return None

    def _cache_add(self, value: Any) -> int:
        if getattr(value, "__hash__", None) is None:
            return -1  # "not cached": the reader takes the value without storing it
        i = self._out_next
        self._out_next = (i + 1) % self.cache_size
        index = self._out_index
        if len(index) >= self.cache_size:
            return -1
        old = self._out_slots[i]
        if old is not _EMPTY and index.get(old) == i:
            del index[old]
        self._out_slots[i] = value
        index[value] = i
        return i

    def _loose_fields(self, obj: Any, w: Writer) -> None:
        for name, kind, _ in spec(type(obj), self.version)[1]:
            v = getattr(obj, name)
            if kind is BOOL:
                w.boolean(v)
            elif kind is STRING:
                w.boolean(v is not None)
                if v is not None:
                    w.utf(v)
            elif kind is CACHED:
                if self.cache:
                    i = self._cached_index(v)
                    w.boolean(i is None)
                    if i is None:
                        w.i16(self._cache_add(v))
                        self._loose_nested(v, w)
                    else:
                        w.i16(i)
                else:
                    self._loose_nested(v, w)
            elif kind is LONG:
                w.i64(v)
            elif kind is INT:
                w.i32(v)
            elif kind is BYTE:
                w.u8(v)
            elif kind is NESTED:
                self._loose_nested(v, w)
            elif kind is BYTES:
                w.boolean(v is not None)
                if v is not None:
                    w.i32(len(v))
                    w.raw(v)
            elif kind is PROPERTIES:
                w.boolean(v is not None)
                if v is not None:
                    self._properties(v, w)
            elif kind is ARRAY:
                w.boolean(v is not None)
                if v is not None:
                    w.i16(len(v))
                    for item in v:
                        self._loose_nested(item, w)
            elif kind is THROWABLE:
                self._loose_throwable(v, w)
            elif kind is MAGIC:
                w.raw(_magic(v))

    def _loose_nested(self, v: Any, w: Writer) -> None:
        w.boolean(v is not None)
        if v is not None:
            w.u8(_type_of(v))
            self._loose_fields(v, w)

    def _loose_throwable(self, t: Throwable | None, w: Writer) -> None:
        w.boolean(t is not None)
        if t is None:
            return
        for s in (t.class_name, t.message):
            w.boolean(s is not None)
            if s is not None:
                w.utf(s)
        if self.stack_trace:
            w.i16(len(t.stack_trace))
            for e in t.stack_trace:
                for s in (e.class_name, e.method_name, e.file_name):
                    w.boolean(s is not None)
                    if s is not None:
                        w.utf(s)
                w.i32(e.line_number)
            self._loose_throwable(t.cause, w)

    def _properties(self, v: dict[str, Any], w: Writer) -> None:
        inner = Writer()
        encode_map(inner, v)
        w.i32(len(inner.buf))
        w.raw(inner.buf)

    def _tight_fields(self, obj: Any, w: Writer, bits: BitWriter) -> None:
        bit = bits.write
        for name, kind, _ in spec(type(obj), self.version)[1]:
            v = getattr(obj, name)
            if kind is BOOL:
                bit(bool(v))
            elif kind is STRING:
                _tight_string(v, w, bits)
            elif kind is CACHED:
                if self.cache:
                    i = self._cached_index(v)
                    bit(i is None)
                    if i is None:
                        w.i16(self._cache_add(v))
                        self._tight_nested(v, w, bits)
                    else:
                        w.i16(i)
                else:
                    self._tight_nested(v, w, bits)
            elif kind is LONG:
                _tight_long(v, w, bits)
            elif kind is INT:
                w.i32(v)
            elif kind is BYTE:
                w.u8(v)
            elif kind is NESTED:
                self._tight_nested(v, w, bits)
            elif kind is BYTES:
                bit(v is not None)
                if v is not None:
                    w.i32(len(v))
                    w.raw(v)
            elif kind is PROPERTIES:
                bit(v is not None)
                if v is not None:
                    self._properties(v, w)
            elif kind is ARRAY:
                bit(v is not None)
                if v is not None:
                    w.i16(len(v))
                    for item in v:
                        self._tight_nested(item, w, bits)
            elif kind is THROWABLE:
                self._tight_throwable(v, w, bits)
            elif kind is MAGIC:
                w.raw(_magic(v))

    def _tight_nested(self, v: Any, w: Writer, bits: BitWriter) -> None:
        bits.write(v is not None)
        if v is not None:
            w.u8(_type_of(v))
            if v.MARSHAL_AWARE:
                bits.write(False)  # no pre-marshalled form follows
            self._tight_fields(v, w, bits)

    def _tight_throwable(self, t: Throwable | None, w: Writer, bits: BitWriter) -> None:
        bits.write(t is not None)
        if t is None:
            return
        _tight_string(t.class_name, w, bits)
        _tight_string(t.message, w, bits)
        if self.stack_trace:
            w.i16(len(t.stack_trace))
            for e in t.stack_trace:
                _tight_string(e.class_name, w, bits)
                _tight_string(e.method_name, w, bits)
                _tight_string(e.file_name, w, bits)
                w.i32(e.line_number)
            self._tight_throwable(t.cause, w, bits)

    # --- decoding ------------------------------------------------------------------------

    def decode(self, body: bytes | bytearray | memoryview) -> DataStructure:
        """One command from its bytes after the size prefix (type code first). Raises
        `OpenWireError` for anything malformed, including bytes left over."""
        r = Reader(body)
        try:
            command = self.decode_from(r)
        except Truncated:
            raise OpenWireError("command ends before its last field") from None
        if r.remaining():
            raise OpenWireError(f"{r.remaining()} bytes after the end of {type(command).__name__}")
        return command

    def decode_from(self, r: Reader) -> DataStructure:
        """One command from a reader; `Truncated` if it runs out (for unprefixed streams)."""
        code = r.u8()
        cls = model.TYPES.get(code)
        if cls is None:
            raise OpenWireError(f"unknown command type {code}")
        if not issubclass(cls, (model.BaseCommand, model.WireFormatInfo)):
            raise OpenWireError(f"type {code} ({cls.__name__}) is not a command")
        self._depth = 0
        if self.tight:
            return self._tight_read(cls, r, BitReader(r))
        return self._loose_read(cls, r)

    def _cls(self, code: int, of: type) -> type[DataStructure]:
        cls = model.TYPES.get(code)
        if cls is None:
            raise OpenWireError(f"unknown data structure type {code}")
        if not issubclass(cls, of):
            raise OpenWireError(f"{cls.__name__} where a {of.__name__} belongs")
        return cls

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise OpenWireError("data structures nested too deep")

    def _loose_read(self, cls: type, r: Reader) -> Any:
        _, present, positions, defaults = spec(cls, self.version)
        values = list(defaults)
        for (_, kind, of), pos in zip(present, positions):
            if kind is BOOL:
                v: Any = r.boolean()
            elif kind is STRING:
                v = r.utf() if r.boolean() else None
            elif kind is CACHED:
                if self.cache:
                    fresh = r.boolean()
                    i = r.i16()
                    if fresh:
                        v = self._loose_nested_read(r, of)
                        self._in_store(i, v)
                    else:
                        v = self._in_fetch(i, of)
                else:
                    v = self._loose_nested_read(r, of)
            elif kind is LONG:
                v = r.i64()
            elif kind is INT:
                v = r.i32()
            elif kind is BYTE:
                v = r.i8()
            elif kind is NESTED:
                v = self._loose_nested_read(r, of)
            elif kind is BYTES:
                v = r.take(r.i32()) if r.boolean() else None
            elif kind is PROPERTIES:
                v = self._properties_read(r, cls) if r.boolean() else None
            elif kind is ARRAY:
                if r.boolean():
                    count = _count(r)
                    v = tuple(self._loose_nested_read(r, of) for _ in range(count))
                else:
                    v = None
            elif kind is THROWABLE:
                v = self._loose_throwable_read(r, 0)
            else:  # MAGIC
                v = r.take(8)
                if v != _MAGIC:
                    raise OpenWireError(f"bad WireFormatInfo magic {v!r}")
            values[pos] = v
        return cls(*values)

    def _loose_nested_read(self, r: Reader, of: type) -> Any:
        if not r.boolean():
            return None
        cls = self._cls(r.u8(), of)
        self._enter()
        v = self._loose_read(cls, r)
        self._depth -= 1
        return v

    def _loose_throwable_read(self, r: Reader, depth: int) -> Throwable | None:
        if not r.boolean():
            return None
        if depth > MAX_DEPTH:
            raise OpenWireError("exception causes nested too deep")
        class_name = r.utf() if r.boolean() else None
        message = r.utf() if r.boolean() else None
        if not self.stack_trace:
            return Throwable(class_name, message)
        trace = []
        for _ in range(_count(r)):
            names = [r.utf() if r.boolean() else None for _ in range(3)]
            trace.append(StackTraceElement(names[0], names[1], names[2], r.i32()))
        cause = self._loose_throwable_read(r, depth + 1)
        return Throwable(class_name, message, tuple(trace), cause)

    def _properties_read(self, r: Reader, cls: type) -> dict[str, Any] | None:
        size = r.i32()
        if size < 0 or size > r.remaining():
            if size < 0:
                raise OpenWireError(f"negative length {size}")
            raise Truncated(r.pos + size)
        end = r.pos + size
        inner = Reader(r.data, r.pos, end)
        limit = MAX_WIREFORMAT_PROPERTIES if cls is model.WireFormatInfo else None
        try:
            v = decode_map(inner, 0, limit)
        except Truncated:
            raise OpenWireError("marshalled properties end early") from None
        if inner.pos != end:
            raise OpenWireError("bytes after the end of the marshalled properties")
        r.pos = end
        return v

    def _in_store(self, i: int, v: Any) -> None:
        if i == -1:  # the writer's table was full: not cached
            return
        if not 0 <= i < self.cache_size:
            raise OpenWireError(f"cache slot {i} outside the negotiated cache size {self.cache_size}")
        self._in_slots[i] = v

    def _in_fetch(self, i: int, of: type) -> Any:
        if not 0 <= i < self.cache_size:
            raise OpenWireError(f"cache slot {i} outside the negotiated cache size {self.cache_size}")
        v = self._in_slots[i]
        if v is not None and not isinstance(v, of):
            raise OpenWireError(f"cache slot {i} holds a {type(v).__name__}, not a {of.__name__}")
        return v

    def _tight_read(self, cls: type, r: Reader, bits: BitReader) -> Any:
        _, present, positions, defaults = spec(cls, self.version)
        values = list(defaults)
        bit = bits.read
        for (_, kind, of), pos in zip(present, positions):
            if kind is BOOL:
                v: Any = bit()
            elif kind is STRING:
                v = _tight_string_read(r, bits)
            elif kind is CACHED:
                if self.cache:
                    fresh = bit()
                    i = r.i16()
                    if fresh:
                        v = self._tight_nested_read(r, bits, of)
                        self._in_store(i, v)
                    else:
                        v = self._in_fetch(i, of)
                else:
                    v = self._tight_nested_read(r, bits, of)
            elif kind is LONG:
                if bit():
                    v = r.i64() if bit() else r.i32() & 0xFFFFFFFF
                else:
                    v = r.u16() if bit() else 0
            elif kind is INT:
                v = r.i32()
            elif kind is BYTE:
                v = r.i8()
            elif kind is NESTED:
                v = self._tight_nested_read(r, bits, of)
            elif kind is BYTES:
                v = r.take(r.i32()) if bit() else None
            elif kind is PROPERTIES:
                v = self._properties_read(r, cls) if bit() else None
            elif kind is ARRAY:
                if bit():
                    count = _count(r)
                    v = tuple(self._tight_nested_read(r, bits, of) for _ in range(count))
                else:
                    v = None
            elif kind is THROWABLE:
                v = self._tight_throwable_read(r, bits, 0)
            else:  # MAGIC
                v = r.take(8)
                if v != _MAGIC:
                    raise OpenWireError(f"bad WireFormatInfo magic {v!r}")
            values[pos] = v
        return cls(*values)

    def _tight_nested_read(self, r: Reader, bits: BitReader, of: type) -> Any:
        if not bits.read():
            return None
        cls = self._cls(r.u8(), of)
        self._enter()
        if cls.MARSHAL_AWARE and bits.read():
            # A pre-marshalled form: its own size, type code and boolean stream.
            r.i32()
            r.u8()
            v = self._tight_read(cls, r, BitReader(r))
        else:
            v = self._tight_read(cls, r, bits)
        self._depth -= 1
        return v

    def _tight_throwable_read(self, r: Reader, bits: BitReader, depth: int) -> Throwable | None:
        if not bits.read():
            return None
        if depth > MAX_DEPTH:
            raise OpenWireError("exception causes nested too deep")
        class_name = _tight_string_read(r, bits)
        message = _tight_string_read(r, bits)
        if not self.stack_trace:
            return Throwable(class_name, message)
        trace = []
        for _ in range(_count(r)):
            names = [_tight_string_read(r, bits) for _ in range(3)]
            trace.append(StackTraceElement(names[0], names[1], names[2], r.i32()))
        cause = self._tight_throwable_read(r, bits, depth + 1)
        return Throwable(class_name, message, tuple(trace), cause)


def _count(r: Reader) -> int:
    n = r.i16()
    if n < 0:
        raise OpenWireError(f"negative array length {n}")
    return n


def _type_of(v: Any) -> int:
    code = getattr(type(v), "TYPE", -1)
    if model.TYPES.get(code) is not type(v):
        raise OpenWireError(f"{type(v).__name__} is not an OpenWire data structure")
    return int(code)


def _magic(v: bytes) -> bytes:
    if len(v) != 8:
        raise OpenWireError("WireFormatInfo magic must be 8 bytes")
    return v


def _tight_long(v: int, w: Writer, bits: BitWriter) -> None:
    if not INT64_MIN <= v <= INT64_MAX:
        raise OpenWireError(f"long {v} out of range")
    if v == 0:
        bits.write(False)
        bits.write(False)
    elif v & ~0xFFFF & 0xFFFFFFFFFFFFFFFF == 0:
        bits.write(False)
        bits.write(True)
        w.u16(v)
    elif v & ~0xFFFFFFFF & 0xFFFFFFFFFFFFFFFF == 0:
        bits.write(True)
        bits.write(False)
        w.i32(v - (1 << 32) if v >= 1 << 31 else v)
    else:
        bits.write(True)
        bits.write(True)
        w.i64(v)


def _tight_string(v: str | None, w: Writer, bits: BitWriter) -> None:
    """Present bit, ASCII bit; ASCII (1-127 only) as a 16-bit length and the bytes, anything
    else as writeUTF. Classic refuses strings of 32767 or more encoded bytes here."""
    bits.write(v is not None)
    if v is None:
        return
    ascii_only = v.isascii() and "\x00" not in v
    bits.write(ascii_only)
    data = v.encode("ascii") if ascii_only else encode_mutf8(v)
    if len(data) >= 0x7FFF:
        raise OpenWireError(f"string of {len(data)} bytes is too long for the tight encoding")
    w.u16(len(data))
    w.raw(data)


def _tight_string_read(r: Reader, bits: BitReader) -> str | None:
    if not bits.read():
        return None
    if bits.read():
        size = r.i16()
        if size < 0:
            raise OpenWireError(f"negative string length {size}")
        return r.take(size).decode("latin-1")
    return decode_mutf8(r.take(r.u16()))
