"""MQTT's primitive data types (section 1.5 of both specifications): two- and four-byte
integers, the variable byte integer, UTF-8 strings and binary data, each read from a packet body
at a position and returning the value with the next position. A read past the end of the body is
a malformed packet: the body's length is known (the remaining length), so running out means the
lengths inside contradict it.
"""
from __future__ import annotations

from .errors import malformed

MAX_VARINT = 268_435_455  # four bytes of seven bits


def read_u8(body: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(body):
        raise malformed("packet ends inside a byte field")
    return body[pos], pos + 1


def read_u16(body: bytes, pos: int) -> tuple[int, int]:
    end = pos + 2
    if end > len(body):
        raise malformed("packet ends inside a two-byte integer")
    return (body[pos] << 8) | body[pos + 1], end


def read_u32(body: bytes, pos: int) -> tuple[int, int]:
    end = pos + 4
    if end > len(body):
        raise malformed("packet ends inside a four-byte integer")
    return int.from_bytes(body[pos:end], "big"), end


def read_varint(body: bytes, pos: int) -> tuple[int, int]:
    """A variable byte integer; at most four bytes, and (MQTT 5, [MQTT-1.5.5-1]) in the fewest
    bytes that hold the value: a non-minimal encoding is malformed."""
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(body):
            raise malformed("packet ends inside a variable byte integer")
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift == 28:
            raise malformed("variable byte integer longer than four bytes")
    if pos - start > 1 and b == 0:
        raise malformed("variable byte integer not in its shortest form")
    return value, pos


def read_binary(body: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = read_u16(body, pos)
    end = pos + n
    if end > len(body):
        raise malformed("packet ends inside a binary field")
    return body[pos:end], end


def decode_utf8(raw: bytes) -> str:
    """Well-formed UTF-8 without U+0000 ([MQTT-1.5.4-1], [MQTT-1.5.4-2]); else malformed.
    Python's strict decoder already refuses overlong forms and encoded surrogates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("string is not well-formed UTF-8") from None
    if "\x00" in text:
        raise malformed("string contains U+0000")
    return text


def read_string(body: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_u16(body, pos)
    end = pos + n
    if end > len(body):
        raise malformed("packet ends inside a string")
    return decode_utf8(body[pos:end]), end


# Encoding.

def varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    if not 0 <= value <= MAX_VARINT:
        raise malformed(f"{value} does not fit a variable byte integer")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def u16(value: int) -> bytes:
    if not 0 <= value <= 0xFFFF:
        raise malformed(f"{value} does not fit a two-byte integer")
    return value.to_bytes(2, "big")


def u32(value: int) -> bytes:
    if not 0 <= value <= 0xFFFFFFFF:
        raise malformed(f"{value} does not fit a four-byte integer")
    return value.to_bytes(4, "big")


def binary(value: bytes) -> bytes:
    if len(value) > 0xFFFF:
        raise malformed("binary field longer than 65,535 bytes")
    return len(value).to_bytes(2, "big") + value


def string(value: str) -> bytes:
    if "\x00" in value:
        raise malformed("string contains U+0000")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise malformed("string holds a lone surrogate") from None
    if len(raw) > 0xFFFF:
        raise malformed("string longer than 65,535 bytes")
    return len(raw).to_bytes(2, "big") + raw
