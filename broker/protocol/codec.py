"""Reads the few fields routing needs straight from a message's encoded AMQP sections, and makes
the encoded header (the edits the broker applies on the way out, delivery count and added
annotations, are in `codec_edits.py`).

A full `proton.Message` decode + encode costs 32-42 µs, several times the whole per-message path
(ARCHITECTURE.md, "Design facts"), so the broker keeps each message as the bytes the producer sent.
On arrival it scans the section boundaries and decodes the header (and message annotations when
there are any); properties and application properties are decoded only when something asks
(a selector, a group, anonymous relay). This module imports no Proton; the value types and
their encoding live in `amqptypes.py`.
"""
from __future__ import annotations

import uuid
from typing import Any

from .amqptypes import (  # noqa: F401 - the codec's public names include the value types
    _DECODERS, MALFORMED, Byte, Char, DecodeError, Described, Symbol, Timestamp, UByte, UInt, ULong,
    _u32, _u64, decode, encode, skip)

# Section descriptors (amqp:header:list ... amqp:footer:map).
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = range(0x70, 0x75)
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = range(0x75, 0x79)

_SYMBOL_DESCRIPTORS = {
    "amqp:header:list": HEADER, "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS, "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES, "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE, "amqp:amqp-value:*": AMQP_VALUE, "amqp:footer:map": FOOTER,
}


# -- bounded decoding ---------------------------------------------------------------------------
# Annotations and properties are decoded by Python code, element by element: a 100 MB array
# inside an annotation would hold the event loop for minutes. So a map section may have at most
# MAX_SECTION_ENTRIES entries (more: refused as a decode error, found from the count field in
# O(1)), and list, map, array and described values are decoded only while they fit in
# COMPOUND_BUDGET bytes per section; bigger ones stay encoded, read as an opaque `Undecoded`
# (a selector sees it as no usable value; the bytes go out as they came).
MAX_SECTION_ENTRIES = 4096
COMPOUND_BUDGET = 16 * 1024
_COMPOUND_CODES = frozenset((0x00, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0))


class Undecoded:
    """A value left encoded because decoding it would cost too much on the event loop."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size

    def __repr__(self) -> str:
        return f"<undecoded {self.size} bytes>"


class _Budget:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = COMPOUND_BUDGET


def _bounded_value(buf: bytes, p: int, budget: _Budget) -> tuple[Any, int]:
    if buf[p] not in _COMPOUND_CODES:
        return decode(buf, p)
    end = skip(buf, p)
    size = end - p
    if size > budget.left:
        return Undecoded(size), end
    budget.left -= size
    return decode(buf, p)


def _compound_header(buf: bytes, p: int) -> tuple[int, int, int]:
    """(element count, position of the first element, end) of the list or map at `p`."""
    code = buf[p]
    if code in (0xC0, 0xC1):
        return buf[p + 2], p + 3, p + 2 + buf[p + 1]
    return _u32(buf, p + 5)[0], p + 9, p + 5 + _u32(buf, p + 1)[0]


def _bounded_map(buf: bytes, p: int, what: str, refuse_large: bool = False) -> tuple[dict, int]:
    """The map at `p` (a map section's value), decoded within the bounds above; with
    `refuse_large` (message annotations, checked on arrival) a compound value over the budget
    is refused as a decode error instead of being left encoded."""
    code = buf[p]
    if code not in (0xC1, 0xD1):
        return {}, skip(buf, p)
    count, q, end = _compound_header(buf, p)
    if count % 2:
        raise DecodeError(f"{what}: a map with an odd number of items")
    if count > 2 * MAX_SECTION_ENTRIES:
        raise DecodeError(f"{what} with {count // 2} entries: at most {MAX_SECTION_ENTRIES}")
    budget = _Budget()
    out: dict = {}
    for _ in range(count // 2):
        key, q = _bounded_value(buf, q, budget)
        value, q = _bounded_value(buf, q, budget)
        if refuse_large and (isinstance(value, Undecoded) or isinstance(key, Undecoded)):
            raise DecodeError(f"{what}: list, map or array values over {COMPOUND_BUDGET} bytes")
        try:
            out[key] = value
        except TypeError:  # an unhashable key (a list): keep it findable by its text
            out[repr(key)] = value
    if q != end:
        raise DecodeError(f"{what}: map size mismatch at {q}")
    return out, end


def _bounded_fields(buf: bytes, p: int, limit: int) -> list:
    """The first `limit` elements of the list at `p`, decoded within the bounds above."""
    code = buf[p]
    if code == 0x45:
        return []
    if code not in (0xC0, 0xD0):
        return []
    count, q, end = _compound_header(buf, p)
    budget = _Budget()
    fields = []
    for _ in range(min(count, limit)):
        value, q = _bounded_value(buf, q, budget)
        fields.append(value)
    if q > end:
        raise DecodeError(f"list elements overrun the list at {p}")
    return fields


# -- sections -----------------------------------------------------------------------------------


def sections(buf: bytes) -> list[tuple[int, int, int]]:
    """(descriptor code, start, end) of every section, in order."""
    out = []
    pos, n = 0, len(buf)
    try:
        while pos < n:
            descriptor, p = _section_start(buf, pos)
            end = skip(buf, p)
            out.append((descriptor, pos, end))
            pos = end
    except DecodeError:
        raise
    except MALFORMED:
        raise DecodeError(f"malformed AMQP message at {pos}") from None
    return out


def _section_start(buf: bytes, pos: int) -> tuple[int, int]:
    """The section starting at `pos`: (its descriptor code, where its value starts)."""
    if buf[pos] != 0x00:
        raise DecodeError(f"expected a described section at {pos}")
    if buf[pos + 1] == 0x53:
        return buf[pos + 2], pos + 3
    return _descriptor(buf, pos + 1)


def _descriptor(buf: bytes, p: int) -> tuple[int, int]:
    """A section descriptor written as a ulong or a symbol: (section code, position after)."""
    if buf[p] == 0x80:
        return _u64(buf, p + 1)[0], p + 9
    sym, after = decode(buf, p)
    if not isinstance(sym, str):
        raise DecodeError(f"a section descriptor is neither a ulong nor a symbol at {p}")
    return _SYMBOL_DESCRIPTORS.get(sym, -1), after


def section_value(buf: bytes, start: int) -> Any:
    """The value of the section starting at `start` (skipping its descriptor)."""
    try:
        p = start + 3 if buf[start + 1] == 0x53 else skip(buf, start + 1)
    except IndexError:
        raise DecodeError(f"truncated section at {start}") from None
    return decode(buf, p)[0]


# Header encodings already decoded: (durable, priority, ttl, first-acquirer) by the bytes of
# the header's list. Emptied when full, as codec_edits._ENTRIES.
_HEADERS: dict[bytes, tuple[bool, int, int, bool]] = {}
MAX_CACHED_HEADERS = 256
# The five fields take at most 24 bytes in their usual encodings; anything much longer is a
# hostile or odd sender's, and caching it would let one connection pin 256 big byte strings.
MAX_CACHED_HEADER_BYTES = 64


def _header_fields(buf: bytes, p: int, code: int) -> tuple[bool, int, int, bool]:
    """(durable, priority, ttl, first-acquirer) of the header list at `p`; a field of the
    wrong type reads as its default (the message passes as sent)."""
    decoder = _DECODERS[code]
    if decoder is None or code not in (0xC0, 0xD0, 0x45):
        raise DecodeError("header is not a list")
    fields = decoder(buf, p + 1)[0]
    count = len(fields)
    durable = bool(fields[0]) if count > 0 and fields[0] is not None else False
    priority = fields[1] if count > 1 and _is_uint(fields[1], 0xFF) else 4
    ttl = fields[2] if count > 2 and _is_uint(fields[2], 0xFFFFFFFF) else 0
    first_acquirer = bool(fields[3]) if count > 3 and fields[3] is not None else False
    return durable, priority, ttl, first_acquirer


class Envelope:
    """What the broker reads from every arriving message: header fields and where the other
    sections are. Built once on arrival; cheap (no properties decode)."""

    __slots__ = ("durable", "priority", "ttl", "first_acquirer", "header_end", "annotations",
                 "annotations_at", "properties_at", "properties_count", "app_properties_at", "bare_at")

    def __init__(self, buf: bytes):
        self.durable = False
        self.priority = 4
        self.ttl = 0
        self.first_acquirer = False
        self.header_end = 0  # bytes before this are the header section (0: none)
        self.annotations: dict | None = None
        self.annotations_at = -1
        self.properties_at = -1
        # How many property fields are present (trailing nulls are left out when encoding):
        # with 8 or fewer there is no absolute-expiry-time, with 10 or fewer no group-id, so
        # most messages never need their properties decoded.
        self.properties_count = 0
        self.app_properties_at = -1
        self.bare_at = 0  # where the bare message starts (after header and annotations)
        # One pass over the section boundaries, stopping at the body: nothing routing needs
        # comes after the application properties, and the body is never looked at.
        pos, n, end = 0, len(buf), 0
        try:
            while pos < n:
                if buf[pos] == 0x00 and buf[pos + 1] == 0x53:  # a small-ulong descriptor, inline
                    descriptor, p = buf[pos + 2], pos + 3
                else:
                    descriptor, p = _section_start(buf, pos)
                if descriptor >= DATA or descriptor < HEADER:
                    if descriptor < HEADER or descriptor > FOOTER:
                        raise DecodeError(f"unknown section descriptor at {pos}")
                    break
                code = buf[p]
                if descriptor == HEADER:
                    if code == 0x45:  # an empty list: every field at its default
                        end = p + 1
                    else:
                        end = self._read_header(buf, p, code)
                    self.header_end = self.bare_at = end
                elif descriptor == MESSAGE_ANNOTATIONS:
                    self.annotations_at = pos
                    self.annotations, end = _bounded_map(buf, p, "message annotations", refuse_large=True)
                    self.bare_at = end
                elif descriptor == PROPERTIES:
                    # The list's size and count read inline for the usual encodings (skip's
                    # general dispatch is most of a small message's scan otherwise). With the
                    # header cache: Envelope of a 1 KiB message 0.75 -> 0.52 µs (empty header
                    # and properties, the perf client's), 1.10 -> 0.71 µs (durable header).
                    self.properties_at = pos
                    if code == 0xC0:
                        end = p + 2 + buf[p + 1]
                        self.properties_count = buf[p + 2]
                    elif code == 0x45:
                        end = p + 1
                    else:
                        end = skip(buf, p)
                        self.properties_count = _u32(buf, p + 5)[0] if code == 0xD0 else 0
                else:
                    end = p + 2 + buf[p + 1] if code == 0xC1 else skip(buf, p)  # a small map inline
                    if descriptor == DELIVERY_ANNOTATIONS:
                        self.bare_at = end
                    elif descriptor == APPLICATION_PROPERTIES:
                        self.app_properties_at = pos
                        break
                pos = end
        except DecodeError:
            raise
        except MALFORMED:
            raise DecodeError(f"malformed AMQP message at {pos}") from None
        if end > n:
            raise DecodeError("truncated AMQP message")

    def _read_header(self, buf: bytes, p: int, code: int) -> int:
        """Set the header fields from the header list at `p`; returns where it ends. A
        producer sends the same few header encodings again and again: each is decoded once and
        kept (`_HEADERS`), so a message costs a slice and a lookup, not a list decode."""
        end = p + 2 + buf[p + 1] if code == 0xC0 else skip(buf, p)
        key = buf[p:end]
        if type(key) is not bytes:
            key = bytes(key)  # a bytearray's slice is no dictionary key
        fields = _HEADERS.get(key)
        if fields is None:
            fields = _header_fields(buf, p, code)
            if len(key) <= MAX_CACHED_HEADER_BYTES:  # a padded or oversized header is not kept
                if len(_HEADERS) >= MAX_CACHED_HEADERS:
                    _HEADERS.clear()
                _HEADERS[key] = fields
        self.durable, self.priority, self.ttl, self.first_acquirer = fields
        return end

    def shifted(self, header_end: int, annotations: dict | None, annotations_at: int, bare_at: int) -> Envelope:
        """The envelope of a copy whose header and annotations were rewritten: the bare message
        moved by (bare_at - self.bare_at) bytes; nothing needs parsing again."""
        copy = Envelope.__new__(Envelope)
        delta = bare_at - self.bare_at
        copy.durable, copy.priority, copy.ttl = self.durable, self.priority, self.ttl
        copy.first_acquirer = self.first_acquirer
        copy.header_end = header_end
        copy.annotations = annotations
        copy.annotations_at = annotations_at
        copy.properties_at = self.properties_at + delta if self.properties_at >= 0 else -1
        copy.properties_count = self.properties_count
        copy.app_properties_at = self.app_properties_at + delta if self.app_properties_at >= 0 else -1
        copy.bare_at = bare_at
        return copy

    # Properties and application properties are decoded on first use, long after the message
    # was accepted; the arrival scan checked only their framing. Contents that do not decode
    # read as no properties: the message is passed on as it came, and the broker's filters see
    # nothing in it (a strict check on arrival would cost every message a full decode).
    def properties_of(self, buf: bytes) -> dict[str, Any]:
        try:
            return decode_properties(buf, self.properties_at)
        except DecodeError:
            return {}

    def application_properties_of(self, buf: bytes) -> dict:
        try:
            return decode_map_section(buf, self.app_properties_at)
        except DecodeError:
            return {}


PROPERTY_FIELDS = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
                   "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
                   "group_id", "group_sequence", "reply_to_group_id")


def _is_uint(value: Any, top: int) -> bool:
    return type(value) is not bool and isinstance(value, int) and 0 <= value <= top


def _is_message_id(value: Any) -> bool:
    """ulong, uuid, binary or string (amqp:message-id-*)."""
    return isinstance(value, (str, bytes, uuid.UUID)) or _is_uint(value, 0xFFFFFFFFFFFFFFFF)


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_timestamp(value: Any) -> bool:
    return type(value) is Timestamp


# The AMQP type of each properties field, as the decoder returns it. A field whose value has
# another type (a string absolute-expiry-time, a list group-id, a NaN double creation-time)
# reads as absent, as an undecodable section does; the encoded message is never changed.
_PROPERTY_TYPES = (_is_message_id, lambda v: isinstance(v, bytes), _is_string, _is_string,
                   _is_string, _is_message_id, _is_string, _is_string, _is_timestamp,
                   _is_timestamp, _is_string, lambda v: _is_uint(v, 0xFFFFFFFF), _is_string)


def decode_properties(buf: bytes, at: int) -> dict[str, Any]:
    """The properties section as a dict of the fields that are set with their AMQP type."""
    if at < 0:
        return {}
    try:
        fields = _bounded_fields(buf, _value_start(buf, at), len(PROPERTY_FIELDS))
    except MALFORMED:
        raise DecodeError(f"malformed properties at {at}") from None
    return {name: v for name, v, ok in zip(PROPERTY_FIELDS, fields, _PROPERTY_TYPES)
            if v is not None and not isinstance(v, Undecoded) and ok(v)}


def decode_map_section(buf: bytes, at: int) -> dict:
    if at < 0:
        return {}
    try:
        return _bounded_map(buf, _value_start(buf, at), "map section", refuse_large=True)[0]
    except MALFORMED:
        raise DecodeError(f"malformed map section at {at}") from None


def _value_start(buf: bytes, start: int) -> int:
    """Where the value of the section starting at `start` begins (after its descriptor)."""
    try:
        return start + 3 if buf[start + 1] == 0x53 else skip(buf, start + 1)
    except IndexError:
        raise DecodeError(f"truncated section at {start}") from None


def encode_section(descriptor: int, value: Any) -> bytes:
    return b"\x00\x53" + bytes((descriptor,)) + encode(value)


_HEADER_DEFAULTS = (False, 4, None, False, 0)


def encode_header(durable: bool, priority: int, ttl: int, first_acquirer: bool, delivery_count: int) -> bytes:
    fields = [durable, UByte(priority), UInt(ttl) if ttl else None, first_acquirer, UInt(delivery_count)]
    while fields and fields[-1] == _HEADER_DEFAULTS[len(fields) - 1]:
        fields.pop()  # trailing fields at their defaults are left out, as encoders do
    return encode_section(HEADER, fields)
