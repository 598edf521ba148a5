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
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from . import model
from .errors import OpenWireError, Truncated
from .model import (ARRAY, BOOL, BYTE, BYTES, CACHED, INT, LONG, MAGIC, NESTED, PROPERTIES,
                    STRING, THROWABLE, DataStructure, StackTraceElement, Throwable)
from .values import decode_map, encode_map
from .wire import INT64_MAX, INT64_MIN, Reader, Writer, decode_mutf8, encode_mutf8, read_bits

_I8 = struct.Struct(">b")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NO_BYTES, _TWO_BYTES, _FOUR_BYTES, _EIGHT_BYTES = (False, False), (False, True), (True, False), (True, True)
_ASCII, _NOT_ASCII = (True, True), (True, False)

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


class Plan:
    """One type in one version, compiled from its declaration: the marshalled attributes in wire
    order (with one getter for all of them), each with its kind and nested class, their positions
    among the constructor's arguments, and every argument's default."""

    __slots__ = ("cls", "fields", "positions", "defaults", "get", "loose_steps", "tight_steps")

    def __init__(self, cls: type, version: int) -> None:
        present, positions, defaults = [], [], []
        for i, f in enumerate(dataclasses.fields(cls)):
            kind, since, of = f.metadata["openwire"]
            defaults.append(f.default)
            if version >= since:
                # A properties field's limit depends on the type that carries it.
                present.append((f.name, kind, cls if kind is PROPERTIES else of))
                positions.append(i)
        self.cls = cls
        self.fields: tuple[tuple[str, str, Any], ...] = tuple(present)
        self.positions = tuple(positions)
        self.defaults = tuple(defaults)
        names = [name for name, _, _ in present]
        if len(names) > 1:
            self.get: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
        elif names:
            one = attrgetter(names[0])
            self.get = lambda obj: (one(obj),)
        else:
            self.get = lambda obj: ()
        self.loose_steps = tuple((pos, _LOOSE_READERS[kind], of)
                                 for (_, kind, of), pos in zip(present, positions))
        self.tight_steps = tuple((pos, _TIGHT_READERS[kind], of)
                                 for (_, kind, of), pos in zip(present, positions))


_PLANS: dict[tuple[type, int], Plan] = {}


def plan(cls: type, version: int) -> Plan:
    found = _PLANS.get((cls, version))
    if found is None:
        found = _PLANS[(cls, version)] = Plan(cls, version)
    return found


def spec(cls: type, version: int) -> tuple[type, tuple[tuple[str, str, Any], ...]]:
    """(class, its marshalled fields as (attribute, kind, nested class)) in one version."""
    p = plan(cls, version)
    return p.cls, p.fields


def fields_for(cls: type, version: int) -> list[str]:
    """The attributes `cls` marshals in `version`, in wire order."""
    return [name for name, _, _ in plan(cls, version).fields]


class Premarshalled:
    """A message marshalled on its own, as Classic's marshal-aware form nests it: its size, type
    code, boolean stream and fields (tight), every cached field sent in full under slot -1 (the
    reader keeps nothing), so the same bytes go into any connection's MessageDispatch of that
    wire version and cache setting: a message dispatched to several consumers (a topic's
    subscribers) is marshalled once. The redelivery counter, which changes per delivery, is
    patched in place (`redelivered`)."""

    __slots__ = ("TYPE", "blob", "counter_at", "counter")

    def __init__(self, type_code: int, blob: bytes, counter_at: int, counter: int) -> None:
        self.TYPE = type_code
        self.blob = blob
        self.counter_at = counter_at
        self.counter = counter

    def redelivered(self, counter: int) -> Premarshalled:
        """The same message with another redelivery counter."""
        if counter == self.counter:
            return self
        at = self.counter_at
        blob = b"".join((self.blob[:at], _I32.pack(counter), self.blob[at + 4:]))
        return Premarshalled(self.TYPE, blob, at, counter)


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
        self._counter_at = 0  # where the last redelivery counter marshalled lies (premarshal)

    # --- encoding ------------------------------------------------------------------------

    def encode(self, command: DataStructure) -> bytes:
        """The command's bytes after the size prefix: its type code and its body."""
        return self._encode(command, False)

    def encode_framed(self, command: DataStructure) -> bytes:
        """The command with its 4-byte size prefix, assembled with one copy of the body."""
        return self._encode(command, True)

    def _encode(self, command: DataStructure, framed: bool) -> bytes:
        cls = type(command)
        if model.TYPES.get(getattr(cls, "TYPE", -1)) is not cls:
            raise OpenWireError(f"{cls.__name__} is not an OpenWire type")
        if self.cache:
            self._sweep()
        try:
            if self.tight:
                bits: list[bool] = []
                w = Writer()
                self._tight_fields(command, w, bits)
                head = bytes((cls.TYPE,)) + _marshal_bits(bits)
                if framed:
                    head = _I32.pack(len(head) + len(w.buf)) + head
                return b"".join((head, w.buf))
            w = Writer()
            if framed:
                w.buf += b"\x00\x00\x00\x00"
            w.u8(cls.TYPE)
            self._loose_fields(command, w)
            if framed:
                _I32.pack_into(w.buf, 0, len(w.buf) - 4)
            return bytes(w.buf)
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            if isinstance(exc, OpenWireError):
                raise
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
        p = plan(type(obj), self.version)
        buf = w.buf
        for (_, kind, _), v in zip(p.fields, p.get(obj)):
            if kind is BOOL:
                buf.append(1 if v else 0)
            elif kind is STRING:
                if v is None:
                    buf.append(0)
                else:
                    buf.append(1)
                    w.utf(v)
            elif kind is CACHED:
                if self.cache:
                    i = self._cached_index(v)
                    if i is None:
                        buf.append(1)
                        w.i16(self._cache_add(v))
                        self._loose_nested(v, w)
                    else:
                        buf.append(0)
                        w.i16(i)
                else:
                    self._loose_nested(v, w)
            elif kind is LONG:
                buf += _I64.pack(v)
            elif kind is INT:
                buf += _I32.pack(v)
            elif kind is BYTE:
                buf += _I8.pack(v)
            elif kind is NESTED:
                self._loose_nested(v, w)
            elif kind is BYTES:
                if v is None:
                    buf.append(0)
                else:
                    buf.append(1)
                    buf += _I32.pack(len(v))
                    buf += v
            elif kind is PROPERTIES:
                if v is None:
                    buf.append(0)
                else:
                    buf.append(1)
                    self._properties(v, w)
            elif kind is ARRAY:
                if v is None:
                    buf.append(0)
                else:
                    buf.append(1)
                    w.i16(len(v))
                    for item in v:
                        self._loose_nested(item, w)
            elif kind is THROWABLE:
                self._loose_throwable(v, w, 0)
            elif kind is MAGIC:
                buf += _magic(v)

    def _loose_nested(self, v: Any, w: Writer) -> None:
        if v is None:
            w.buf.append(0)
        else:
            w.buf.append(1)
            w.u8(_type_of(v))
            self._loose_fields(v, w)

    def _loose_throwable(self, t: Throwable | None, w: Writer, depth: int) -> None:
        w.boolean(t is not None)
        if t is None:
            return
        if depth > MAX_DEPTH:
            raise OpenWireError("exception causes nested too deep")
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
            self._loose_throwable(t.cause, w, depth + 1)

    def _properties(self, v: dict[str, Any], w: Writer) -> None:
        inner = Writer()
        encode_map(inner, v)
        w.i32(len(inner.buf))
        w.raw(inner.buf)

    def premarshal(self, message: model.Message) -> Premarshalled:
        """`message` marshalled on its own for nesting in any MessageDispatch of this wire
        version and cache setting (tight encoding only): see Premarshalled."""
        if not self.tight:
            raise OpenWireError("a pre-marshalled form is for tight encoding")
        m = _Uncached(self.version, tight=True, cache=self.cache, cache_size=1)
        bits: list[bool] = []
        w = Writer()
        m._tight_fields(message, w, bits)
        head = bytes((type(message).TYPE,)) + _marshal_bits(bits)
        head = _I32.pack(len(head) + len(w.buf)) + head
        return Premarshalled(type(message).TYPE, b"".join((head, w.buf)), len(head) + m._counter_at,
                             message.redelivery_counter)

    def _tight_fields(self, obj: Any, w: Writer, bits: list[bool]) -> None:
        p = plan(type(obj), self.version)
        bit = bits.append
        buf = w.buf
        for (name, kind, _), v in zip(p.fields, p.get(obj)):
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
                if name == "redelivery_counter":
                    self._counter_at = len(buf)
                buf += _I32.pack(v)
            elif kind is BYTE:
                buf += _I8.pack(v)
            elif kind is NESTED:
                self._tight_nested(v, w, bits)
            elif kind is BYTES:
                bit(v is not None)
                if v is not None:
                    buf += _I32.pack(len(v))
                    buf += v
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
                self._tight_throwable(v, w, bits, 0)
            elif kind is MAGIC:
                buf += _magic(v)

    def _tight_nested(self, v: Any, w: Writer, bits: list[bool]) -> None:
        bits.append(v is not None)
        if v is not None:
            if type(v) is Premarshalled:
                w.u8(v.TYPE)
                bits.append(True)  # its own size, type code, boolean stream and fields follow
                w.buf += v.blob
                return
            w.u8(_type_of(v))
            if v.MARSHAL_AWARE:
                bits.append(False)  # no pre-marshalled form follows
            self._tight_fields(v, w, bits)

    def _tight_throwable(self, t: Throwable | None, w: Writer, bits: list[bool], depth: int) -> None:
        bits.append(t is not None)
        if t is None:
            return
        if depth > MAX_DEPTH:
            raise OpenWireError("exception causes nested too deep")
        _tight_string(t.class_name, w, bits)
        _tight_string(t.message, w, bits)
        if self.stack_trace:
            w.i16(len(t.stack_trace))
            for e in t.stack_trace:
                _tight_string(e.class_name, w, bits)
                _tight_string(e.method_name, w, bits)
                _tight_string(e.file_name, w, bits)
                w.i32(e.line_number)
            self._tight_throwable(t.cause, w, bits, depth + 1)

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
        try:
            if self.tight:
                return self._tight_read(cls, r, read_bits(r))
            return self._loose_read(cls, r)
        except StopIteration:
            raise OpenWireError("boolean stream exhausted") from None
        except RecursionError:
            raise OpenWireError("command nested too deep") from None

    def _cls(self, code: int, of: type) -> type[DataStructure]:
        cls = model.TYPES.get(code)
        if cls is None:
            raise OpenWireError(f"unknown data structure type {code}")
        if not issubclass(cls, of):
            raise OpenWireError(f"{cls.__name__} where a {of.__name__} belongs")
        return cls

    def _loose_read(self, cls: type, r: Reader) -> Any:
        p = plan(cls, self.version)
        values = list(p.defaults)
        for pos, read, of in p.loose_steps:
            values[pos] = read(self, r, of)
        return cls(*values)

    def _tight_read(self, cls: type, r: Reader, bits: Callable[[], bool]) -> Any:
        p = plan(cls, self.version)
        values = list(p.defaults)
        for pos, read, of in p.tight_steps:
            values[pos] = read(self, r, bits, of)
        return cls(*values)

    def _loose_nested_read(self, r: Reader, of: type) -> Any:
        if not r.boolean():
            return None
        cls = self._cls(r.u8(), of)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise OpenWireError("data structures nested too deep")
        v = self._loose_read(cls, r)
        self._depth -= 1
        return v

    def _tight_nested_read(self, r: Reader, bits: Callable[[], bool], of: type) -> Any:
        if not bits():
            return None
        cls = self._cls(r.u8(), of)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise OpenWireError("data structures nested too deep")
        if cls.MARSHAL_AWARE and bits():
            # A pre-marshalled form: its own size, type code and boolean stream.
            r.i32()
            r.u8()
            v = self._tight_read(cls, r, read_bits(r))
        else:
            v = self._tight_read(cls, r, bits)
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

    def _tight_throwable_read(self, r: Reader, bits: Callable[[], bool], depth: int) -> Throwable | None:
        if not bits():
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

    def _properties_read(self, r: Reader, of: type) -> dict[str, Any] | None:
        size = r.i32()
        if size < 0:
            raise OpenWireError(f"negative length {size}")
        if size > r.remaining():
            raise Truncated(r.pos + size)
        end = r.pos + size
        inner = Reader(r.data, r.pos, end)
        limit = MAX_WIREFORMAT_PROPERTIES if of is model.WireFormatInfo else None
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


# --- field readers: one per kind and encoding, looked up once per plan ---------------------

def _magic_read(r: Reader) -> bytes:
    v = r.take(8)
    if v != _MAGIC:
        raise OpenWireError(f"bad WireFormatInfo magic {v!r}")
    return v


def _loose_cached(m: Marshaller, r: Reader, of: type) -> Any:
    if not m.cache:
        return m._loose_nested_read(r, of)
    fresh = r.boolean()
    i = r.i16()
    if not fresh:
        return m._in_fetch(i, of)
    v = m._loose_nested_read(r, of)
    m._in_store(i, v)
    return v


def _loose_array(m: Marshaller, r: Reader, of: type) -> Any:
    if not r.boolean():
        return None
    return tuple([m._loose_nested_read(r, of) for _ in range(_count(r))])


_LOOSE_READERS: dict[str, Callable[[Marshaller, Reader, Any], Any]] = {
    BOOL: lambda m, r, of: r.boolean(),
    BYTE: lambda m, r, of: r.i8(),
    INT: lambda m, r, of: r.i32(),
    LONG: lambda m, r, of: r.i64(),
    STRING: lambda m, r, of: r.utf() if r.boolean() else None,
    NESTED: lambda m, r, of: m._loose_nested_read(r, of),
    CACHED: _loose_cached,
    ARRAY: _loose_array,
    BYTES: lambda m, r, of: r.take(r.i32()) if r.boolean() else None,
    PROPERTIES: lambda m, r, of: m._properties_read(r, of) if r.boolean() else None,
    THROWABLE: lambda m, r, of: m._loose_throwable_read(r, 0),
    MAGIC: lambda m, r, of: _magic_read(r),
}


def _tight_long_read(m: Marshaller, r: Reader, bits: Callable[[], bool], of: Any) -> int:
    if bits():
        return r.i64() if bits() else r.i32() & 0xFFFFFFFF
    return r.u16() if bits() else 0


def _tight_cached(m: Marshaller, r: Reader, bits: Callable[[], bool], of: type) -> Any:
    if not m.cache:
        return m._tight_nested_read(r, bits, of)
    fresh = bits()
    i = r.i16()
    if not fresh:
        return m._in_fetch(i, of)
    v = m._tight_nested_read(r, bits, of)
    m._in_store(i, v)
    return v


def _tight_array(m: Marshaller, r: Reader, bits: Callable[[], bool], of: type) -> Any:
    if not bits():
        return None
    return tuple([m._tight_nested_read(r, bits, of) for _ in range(_count(r))])


_TIGHT_READERS: dict[str, Callable[[Marshaller, Reader, Callable[[], bool], Any], Any]] = {
    BOOL: lambda m, r, bits, of: bits(),
    BYTE: lambda m, r, bits, of: r.i8(),
    INT: lambda m, r, bits, of: r.i32(),
    LONG: _tight_long_read,
    STRING: lambda m, r, bits, of: _tight_string_read(r, bits),
    NESTED: lambda m, r, bits, of: m._tight_nested_read(r, bits, of),
    CACHED: _tight_cached,
    ARRAY: _tight_array,
    BYTES: lambda m, r, bits, of: r.take(r.i32()) if bits() else None,
    PROPERTIES: lambda m, r, bits, of: m._properties_read(r, of) if bits() else None,
    THROWABLE: lambda m, r, bits, of: m._tight_throwable_read(r, bits, 0),
    MAGIC: lambda m, r, bits, of: _magic_read(r),
}


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


def _tight_long(v: int, w: Writer, bits: list[bool]) -> None:
    """Two bits choose 0, 2, 4 or 8 bytes; the short forms are unsigned, so negative values
    take all eight, as in Classic."""
    if not INT64_MIN <= v <= INT64_MAX:
        raise OpenWireError(f"long {v} out of range")
    if v == 0:
        bits += _NO_BYTES
    elif 0 < v <= 0xFFFF:
        bits += _TWO_BYTES
        w.buf += _U16.pack(v)
    elif 0 < v <= 0xFFFFFFFF:
        bits += _FOUR_BYTES
        w.buf += _U32.pack(v)
    else:
        bits += _EIGHT_BYTES
        w.buf += _I64.pack(v)


def _marshal_bits(bits: list[bool]) -> bytes:
    """The boolean stream: its byte count (1 byte below 64, C0 and 1 byte below 256, else 80 and
    2 bytes), then the bits, least significant first."""
    count = (len(bits) + 7) >> 3
    out = bytearray(count)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 1 << (i & 7)
    if count < 64:
        return bytes((count,)) + out
    if count < 256:
        return bytes((0xC0, count)) + out
    return b"\x80" + _U16.pack(count) + out


def _tight_string(v: str | None, w: Writer, bits: list[bool]) -> None:
    """Present bit, ASCII bit; ASCII (1-127 only) as a 16-bit length and the bytes, anything
    else as writeUTF. Classic refuses strings of 32767 or more encoded bytes here."""
    if v is None:
        bits.append(False)
        return
    ascii_only = v.isascii() and "\x00" not in v
    bits += _ASCII if ascii_only else _NOT_ASCII
    data = v.encode("ascii") if ascii_only else encode_mutf8(v)
    if len(data) >= 0x7FFF:
        raise OpenWireError(f"string of {len(data)} bytes is too long for the tight encoding")
    w.u16(len(data))
    w.raw(data)


def _tight_string_read(r: Reader, bits: Callable[[], bool]) -> str | None:
    if not bits():
        return None
    if bits():
        size = r.i16()
        if size < 0:
            raise OpenWireError(f"negative string length {size}")
        return r.take(size).decode("latin-1")
    return decode_mutf8(r.take(r.u16()))


class _Uncached(Marshaller):
    """Cached fields in full, in no slot: what a pre-marshalled form nests (see Premarshalled)."""

    def _cached_index(self, value: Any) -> int | None:
        return None

    def _cache_add(self, value: Any) -> int:
        return -1
