"""Byte-level primitives: big-endian numbers, Java's modified UTF-8 (`DataOutput.writeUTF`),
the tight encoding's boolean stream, a bounds-checked reader over a memoryview and a writer.

Every read checks its bounds before it slices or allocates, so a length field can never make the
codec allocate more than the bytes it was given."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from itertools import chain

from .errors import OpenWireError, Truncated

_I8 = struct.Struct(">b")
_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_NON_BMP = re.compile("[\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FOUR_BYTE_LEAD = re.compile(b"[\xf0-\xff]")


def _split_pair(match: re.Match[str]) -> str:
    code = ord(match.group()) - 0x10000
    return chr(0xD800 | (code >> 10)) + chr(0xDC00 | (code & 0x3FF))


def encode_mutf8(text: str) -> bytes:
    """Java's modified UTF-8: NUL as C0 80, characters beyond the BMP as two 3-byte surrogates.
    Plain UTF-8 otherwise, so the common case is one C-level encode."""
    if text.isascii():
        data = text.encode("ascii")
        return data.replace(b"\x00", b"\xc0\x80") if b"\x00" in data else data
    if _NON_BMP.search(text):
        text = _NON_BMP.sub(_split_pair, text)
    data = text.encode("utf-8", "surrogatepass")
    return data.replace(b"\x00", b"\xc0\x80") if b"\x00" in data else data


def decode_mutf8(data: bytes) -> str:
    """The inverse of `encode_mutf8`; a plain NUL byte is accepted as Java's reader does. Four-byte
    sequences are not modified UTF-8 and are refused, as Java refuses them."""
    if data.isascii():
        return data.decode("ascii")
    if _FOUR_BYTE_LEAD.search(data):
        raise OpenWireError("malformed modified UTF-8 string (4-byte sequence)")
    if b"\xc0\x80" in data:
        data = data.replace(b"\xc0\x80", b"\x00")
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise OpenWireError(f"malformed modified UTF-8 string at byte {exc.start}") from None
    if _SURROGATE.search(text):
        # Pairs written as two 3-byte sequences become one code point; lone halves stay, as a
        # Java String may hold them.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def java_utf_length(text: str) -> int:
    """The byte length `encode_mutf8` gives, without encoding (for limit checks)."""
    return len(encode_mutf8(text))


def java_char_length(text: str) -> int:
    """`String.length()` in Java: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text) + len(_NON_BMP.findall(text))


class Reader:
    """Reads from `data[pos:end]`. Running out raises `Truncated` with the absolute offset
    needed; everything else malformed raises `OpenWireError`."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.data = data if isinstance(data, memoryview) else memoryview(data)
        self.pos = pos
        self.end = len(self.data) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    # Each read checks its bounds inline (this is the codec's innermost loop).

    def u8(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise Truncated(pos + 1)
        self.pos = pos + 1
        return self.data[pos]

    def i8(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise Truncated(pos + 1)
        self.pos = pos + 1
        v = self.data[pos]
        return v - 256 if v > 127 else v

    def boolean(self) -> bool:
        pos = self.pos
        if pos >= self.end:
            raise Truncated(pos + 1)
        self.pos = pos + 1
        return self.data[pos] != 0

    def i16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise Truncated(pos + 2)
        self.pos = pos + 2
        return _I16.unpack_from(self.data, pos)[0]

    def u16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise Truncated(pos + 2)
        self.pos = pos + 2
        return _U16.unpack_from(self.data, pos)[0]

    def i32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise Truncated(pos + 4)
        self.pos = pos + 4
        return _I32.unpack_from(self.data, pos)[0]

    def i64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise Truncated(pos + 8)
        self.pos = pos + 8
        return _I64.unpack_from(self.data, pos)[0]

    def f32(self) -> float:
        pos = self.pos
        if pos + 4 > self.end:
            raise Truncated(pos + 4)
        self.pos = pos + 4
        return _F32.unpack_from(self.data, pos)[0]

    def f64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise Truncated(pos + 8)
        self.pos = pos + 8
        return _F64.unpack_from(self.data, pos)[0]

    def take(self, n: int) -> bytes:
        if n < 0:
            raise OpenWireError(f"negative length {n}")
        pos = self.pos
        if pos + n > self.end:
            raise Truncated(pos + n)
        self.pos = pos + n
        return bytes(self.data[pos:pos + n])

    def utf(self) -> str:
        """`DataInput.readUTF`: an unsigned 16-bit length, then modified UTF-8."""
        return decode_mutf8(self.take(self.u16()))


class Writer:
    """Appends big-endian values to a bytearray."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> None:
        self.buf.append(v & 0xFF)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def u16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def f32(self, v: float) -> None:
        self.buf += _F32.pack(v)

    def f64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def utf(self, text: str) -> None:
        """`DataOutput.writeUTF`: at most 65535 bytes."""
        data = encode_mutf8(text)
        if len(data) > 0xFFFF:
            raise OpenWireError(f"string of {len(data)} bytes is too long for writeUTF")
        self.buf += _U16.pack(len(data))
        self.buf += data


def check_int(v: int, lo: int, hi: int, what: str) -> int:
    if not lo <= v <= hi:
        raise OpenWireError(f"{what} {v} out of range")
    return v




_BITS = tuple(tuple(bool(byte >> i & 1) for i in range(8)) for byte in range(256))


def read_bits(reader: Reader) -> Callable[[], bool]:
    """A marshalled boolean stream from `reader`, as a function giving its bits in order (a C
    iterator's __next__: it raises StopIteration past the end, which the engine reports as an
    `OpenWireError`). The bits are unpacked as they are read, never all at once."""
    count = reader.u8()
    if count == 0xC0:
        count = reader.u8()
    elif count == 0x80:
        count = reader.i16()
        if count < 0:
            raise OpenWireError(f"negative boolean stream length {count}")
    data = reader.take(count)
    return chain.from_iterable(map(_BITS.__getitem__, data)).__next__
