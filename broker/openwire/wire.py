"""Byte-level primitives: big-endian numbers, Java's modified UTF-8 (`DataOutput.writeUTF`),
the tight encoding's boolean stream, a bounds-checked reader over a memoryview and a writer.

Every read checks its bounds before it slices or allocates, so a length field can never make the
codec allocate more than the bytes it was given."""

from __future__ import annotations

import re
import struct

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

    def _need(self, n: int) -> int:
        pos = self.pos
        if n > self.end - pos:
            raise Truncated(pos + n)
        self.pos = pos + n
        return pos

    def u8(self) -> int:
        return _U8.unpack_from(self.data, self._need(1))[0]

    def i8(self) -> int:
        return _I8.unpack_from(self.data, self._need(1))[0]

    def boolean(self) -> bool:
        return self.data[self._need(1)] != 0

    def i16(self) -> int:
        return _I16.unpack_from(self.data, self._need(2))[0]

    def u16(self) -> int:
        return _U16.unpack_from(self.data, self._need(2))[0]

    def i32(self) -> int:
        return _I32.unpack_from(self.data, self._need(4))[0]

    def i64(self) -> int:
        return _I64.unpack_from(self.data, self._need(8))[0]

    def f32(self) -> float:
        return _F32.unpack_from(self.data, self._need(4))[0]

    def f64(self) -> float:
        return _F64.unpack_from(self.data, self._need(8))[0]

    def take(self, n: int) -> bytes:
        if n < 0:
            raise OpenWireError(f"negative length {n}")
        start = self._need(n)
        return bytes(self.data[start:start + n])

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


class BitWriter:
    """The tight encoding's boolean stream: bits in order, least significant bit first."""

    __slots__ = ("bits",)

    def __init__(self) -> None:
        self.bits: list[bool] = []

    def write(self, v: bool) -> None:
        self.bits.append(v)

    def marshal(self) -> bytes:
        bits = self.bits
        count = (len(bits) + 7) >> 3
        out = bytearray(count)
        for i, bit in enumerate(bits):
            if bit:
                out[i >> 3] |= 1 << (i & 7)
        if count < 64:
            head = bytes((count,))
        elif count < 256:
            head = bytes((0xC0, count))
        else:
            head = b"\x80" + _I16.pack(count)
        return head + bytes(out)


class BitReader:
    """Reads a marshalled boolean stream from a `Reader` and hands its bits out in order."""

    __slots__ = ("data", "index", "limit")

    def __init__(self, reader: Reader) -> None:
        count = reader.u8()
        if count == 0xC0:
            count = reader.u8()
        elif count == 0x80:
            count = reader.i16()
            if count < 0:
                raise OpenWireError(f"negative boolean stream length {count}")
        self.data = reader.take(count)
        self.index = 0
        self.limit = count * 8

    def read(self) -> bool:
        i = self.index
        if i >= self.limit:
            raise OpenWireError("boolean stream exhausted")
        self.index = i + 1
        return (self.data[i >> 3] >> (i & 7)) & 1 == 1
