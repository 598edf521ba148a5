"""Message bodies: what `Message.content` holds for each ActiveMQ message type, as Classic's
client writes and reads it, with its compression (`compressed = true`, the connection's
`useCompression`).

- TextMessage: a 32-bit length and the text in modified UTF-8 (length -1: no text); compressed,
  all of that in a zlib stream.
- BytesMessage: the bytes; compressed, the uncompressed length (32 bits) then a zlib stream.
- MapMessage: a marshalled primitive map; StreamMessage: marshalled primitives one after another;
  ObjectMessage: Java serialization, opaque here. Compressed, each in a zlib stream.

Decompression is bounded by the caller's `limit`: a small compressed body cannot expand past it.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from .errors import OpenWireError, Truncated
from .values import decode_map, decode_value, encode_map, encode_value
from .wire import Reader, Writer, decode_mutf8, encode_mutf8

_I32 = struct.Struct(">i")


def inflate(data: bytes, limit: int) -> bytes:
    """A zlib stream's content, refused once it would exceed `limit` bytes."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as exc:
        raise OpenWireError(f"compressed body is not a zlib stream: {exc}") from None
    if len(out) > limit:
        raise OpenWireError(f"compressed body expands past the limit of {limit} bytes")
    return out


def deflate(data: bytes) -> bytes:
    return zlib.compress(data)


def encode_text(text: str | None, compressed: bool = False) -> bytes:
    if text is None:
        body = _I32.pack(-1)
    else:
        data = encode_mutf8(text)
        body = _I32.pack(len(data)) + data
    return deflate(body) if compressed else body


def decode_text(content: bytes | None, compressed: bool = False, limit: int = 1 << 30) -> str | None:
    if content is None:
        return None
    data = inflate(content, limit) if compressed else content
    if len(data) < 4:
        raise OpenWireError("text body shorter than its length field")
    size = _I32.unpack_from(data)[0]
    if size == -1:
        return None
    if size < 0 or size != len(data) - 4:
        raise OpenWireError(f"text body length {size} does not match its {len(data) - 4} bytes")
    return decode_mutf8(data[4:])


def encode_bytes(data: bytes, compressed: bool = False) -> bytes:
    return _I32.pack(len(data)) + deflate(data) if compressed else bytes(data)


def decode_bytes(content: bytes | None, compressed: bool = False, limit: int = 1 << 30) -> bytes:
    if not content:
        return b""
    if not compressed:
        return content
    if len(content) < 4:
        raise OpenWireError("compressed bytes body shorter than its length field")
    size = _I32.unpack_from(content)[0]
    if size < 0 or size > limit:
        raise OpenWireError(f"compressed bytes body claims {size} bytes")
    # Classic's client deflates its whole output buffer, which may run past the body's length
    # (ActiveMQBytesMessage.doCompress): the first `size` bytes are the body, as its reader takes.
    out = inflate(content[4:], limit)
    if len(out) < size:
        raise OpenWireError(f"compressed bytes body holds {len(out)} bytes, not {size}")
    return out[:size]


def encode_map_body(values: dict[str, Any] | None, compressed: bool = False) -> bytes:
    w = Writer()
    encode_map(w, values)
    return deflate(bytes(w.buf)) if compressed else bytes(w.buf)


def decode_map_body(content: bytes | None, compressed: bool = False,
                    limit: int = 1 << 30) -> dict[str, Any] | None:
    if not content:
        return {}
    data = inflate(content, limit) if compressed else content
    r = Reader(data)
    try:
        out = decode_map(r)
    except Truncated:
        raise OpenWireError("map body ends early") from None
    if r.remaining():
        raise OpenWireError("bytes after the end of the map body")
    return out


def encode_stream_body(values: list[Any], compressed: bool = False) -> bytes:
    w = Writer()
    for v in values:
        encode_value(w, v)
    return deflate(bytes(w.buf)) if compressed else bytes(w.buf)


def decode_stream_body(content: bytes | None, compressed: bool = False,
                       limit: int = 1 << 30) -> list[Any]:
    if not content:
        return []
    data = inflate(content, limit) if compressed else content
    r = Reader(data)
    out = []
    try:
        while r.remaining():
            out.append(decode_value(r))
    except Truncated:
        raise OpenWireError("stream body ends early") from None
    return out


def decode_object_body(content: bytes | None, compressed: bool = False,
                       limit: int = 1 << 30) -> bytes:
    """The Java-serialized object's bytes (never deserialized here)."""
    if not content:
        return b""
    return inflate(content, limit) if compressed else content
