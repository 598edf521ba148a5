"""The codec side of management (`management.ports.MessageCodec`): a message's body made
readable for a peek, and a message built from a management send or an `explain` request."""
from __future__ import annotations

import base64
import codecs
import struct
import uuid
from typing import Any

from ..core.message import Message
from ..management.render import jsonable
from . import codec
from .codec import AMQP_SEQUENCE, AMQP_VALUE, APPLICATION_PROPERTIES, DATA, HEADER, PROPERTIES


_BINARY_OR_STRING = {0xA0: 1, 0xA1: 1, 0xB0: 4, 0xB1: 4}  # vbin8, str8, vbin32, str32: size width


def _payload(buf, section: int) -> tuple[int, int | None, int | None]:
    """(constructor, first byte, end) of the binary or string value of the section at
    `section`, without copying it; (constructor, None, None) for any other value."""
    p = section + 3 if buf[section + 1] == 0x53 else codec.skip(buf, section + 1)
    code = buf[p]
    width = _BINARY_OR_STRING.get(code)
    if width is None:
        return code, None, None
    size = buf[p + 1] if width == 1 else struct.unpack_from(">I", buf, p + 1)[0]
    start = p + 1 + width
    if start + size > len(buf):
        raise codec.DecodeError("value runs past the message")
    return code, start, start + size


def _bytes_body(buf, slices: list, max_bytes: int, is_text: bool) -> tuple[str, str, bool]:
    """The bytes of `slices` (in order) as text when they are UTF-8 (always for a string),
    else base64; at most `max_bytes` of them, then `truncated`."""
    total = sum(b - a for a, b in slices)
    truncated = total > max_bytes
    kept, left = [], max_bytes
    for a, b in slices:
        if left <= 0:
            break
        kept.append(bytes(buf[a:min(b, a + left)]))
        left -= b - a
    head = b"".join(kept)
    try:
        if truncated:  # a character cut at the end is dropped, not an error
            text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        else:
            text = head.decode("utf-8")
        return text, "text", truncated
    except UnicodeDecodeError:
        if is_text:
            return head.decode("utf-8", "replace"), "text", truncated
        return base64.b64encode(head).decode("ascii"), "base64", truncated


class ManagementCodec:
    def readable_body(self, encoded: bytes) -> tuple[Any, str]:
        """Text when it is text (an amqp-value string, or data sections that are UTF-8), base64
        for other binary, JSON for other AMQP values (`amqp-value`, `amqp-sequence`)."""
        try:
            parts = [(d, start) for d, start, _end in codec.sections(encoded)
                     if d in (DATA, AMQP_VALUE, AMQP_SEQUENCE)]
            if not parts:
                return None, "none"
            kind = parts[0][0]
            if kind == DATA:  # one or more data sections: their bytes together
                value: Any = b"".join(bytes(codec.section_value(encoded, s)) for d, s in parts if d == DATA)
            elif kind == AMQP_SEQUENCE:
                return jsonable([codec.section_value(encoded, s) for _d, s in parts]), "amqp-sequence"
            else:
                value = codec.section_value(encoded, parts[0][1])
        except codec.DecodeError:
            return base64.b64encode(encoded).decode("ascii"), "base64"
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return bytes(value).decode("utf-8"), "text"
            except UnicodeDecodeError:
                return base64.b64encode(bytes(value)).decode("ascii"), "base64"
        if isinstance(value, str):
            return str(value), "text"
        return jsonable(value), "amqp-value"

    def bounded_body(self, bare, max_bytes: int) -> tuple[Any, str, bool]:
        """`readable_body` for a peek, cut to its first `max_bytes` bytes: (body, encoding,
        truncated). `bare` is the bare message (bytes or a memoryview of a shared body). Only
        the bytes kept are copied or decoded, so a 16 MiB body costs what 64 KiB cost: text is
        cut at a character boundary; binary is base64 of the first `max_bytes`; an AMQP value
        (map, list, sequence) whose encoding is larger is given as base64 of its encoding's
        first `max_bytes` (a cut map is no map)."""
        try:
            parts = [(d, start, end) for d, start, end in codec.sections(bare)
                     if d in (DATA, AMQP_VALUE, AMQP_SEQUENCE)]
            if not parts:
                return None, "none", False
            kind = parts[0][0]
            if kind == DATA:
                slices = [_payload(bare, start) for d, start, _end in parts if d == DATA]
                return _bytes_body(bare, [(a, b) for _code, a, b in slices], max_bytes, False)
            if kind == AMQP_VALUE:
                code, a, b = _payload(bare, parts[0][1])
                if a is not None:
                    return _bytes_body(bare, [(a, b)], max_bytes, code in (0xA1, 0xB1))
            if sum(end - start for _d, start, end in parts) > max_bytes:
                first = bytes(bare[parts[0][1]:parts[0][1] + max_bytes])
                return base64.b64encode(first).decode("ascii"), "base64", True
        except (codec.DecodeError, IndexError, struct.error):
            head = bytes(bare[:max_bytes])
            return base64.b64encode(head).decode("ascii"), "base64", len(bare) > max_bytes
        body, encoding = self.readable_body(bytes(bare))
        return body, encoding, False

    def new_message(self, address: str, body: Any, properties: dict, durable: bool,
                    routing_type: str | None, arrival_ms: int) -> Message:
        """A text message (amqp-value string, as JMS TextMessages are sent) with a fresh id."""
        parts = []
        if durable:
            parts.append(codec.encode_section(HEADER, [True]))
        parts.append(codec.encode_section(PROPERTIES, [f"ID:{uuid.uuid4()}", None, address]))
        if properties:
            parts.append(codec.encode_section(APPLICATION_PROPERTIES, dict(properties)))
        parts.append(codec.encode_section(AMQP_VALUE, body))
        encoded = b"".join(parts)
        return Message(encoded, codec.Envelope(encoded), address, routing_type, None, arrival_ms)
