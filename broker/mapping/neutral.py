"""The protocol-neutral message: AMQP 1.0's sections as plain values, and the two conversions
every non-AMQP adapter needs, `encode` (to the bytes the core and the store keep) and `decode`
(from them, for delivery to a consumer of another protocol).

AMQP is the broker's one message form, so a message from any protocol can reach a consumer of
any other through the same queues, selectors, diverts and store (the contract's mapping table
is written against AMQP's fields). Typed values keep their AMQP type: application properties
(and a map body) are lists of (name, AMQP type name, value) as `amqptypes.typed_map_entries`
reads them, so a JMS `short` property stays a short both ways.

Fields one protocol keeps that the others have no place for travel as message annotations named
`x-opt-hermod-<protocol>-*` (never application properties another protocol's consumer sees).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..protocol.amqptypes import (DecodeError, Symbol, Timestamp, UByte, UInt, decode,
                                  encode_typed_map, typed_map_entries)
from ..protocol.codec import (AMQP_SEQUENCE, AMQP_VALUE, APPLICATION_PROPERTIES, DATA, HEADER,
                              MESSAGE_ANNOTATIONS, PROPERTIES, Envelope, encode_header,
                              encode_section, section_value, sections)

TypedEntries = list[tuple[Any, str, Any]]  # (key, AMQP type name, value)

# Body kinds: one `data` section, one `amqp-value`, one `amqp-sequence`, or none.
DATA_BODY, VALUE_BODY, SEQUENCE_BODY, NO_BODY = "data", "value", "sequence", "none"

# The OASIS JMS mapping's message-type annotation (x-opt-jms-msg-type) values.
JMS_MSG_TYPE = Symbol("x-opt-jms-msg-type")
JMS_MESSAGE, JMS_OBJECT, JMS_MAP, JMS_BYTES, JMS_STREAM, JMS_TEXT = range(6)
JMS_DEST = Symbol("x-opt-jms-dest")
JMS_REPLY_TO = Symbol("x-opt-jms-reply-to")
# x-opt-jms-dest / x-opt-jms-reply-to values.
QUEUE_KIND, TOPIC_KIND, TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND = range(4)


@dataclass
class TypedMap:
    """A map body whose values keep their AMQP types (a JMS MapMessage's entries)."""

    entries: TypedEntries


@dataclass
class NeutralMessage:
    # header
    durable: bool = False
    priority: int = 4
    ttl: int = 0  # ms, 0 = none
    delivery_count: int = 0  # failed delivery attempts before this one
    # message annotations (symbol keys)
    annotations: dict[str, Any] = field(default_factory=dict)
    # properties
    message_id: Any = None  # str, bytes, int (ulong) or uuid
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: Any = None
    content_type: str | None = None
    content_encoding: str | None = None
    absolute_expiry_time: int | None = None  # epoch ms
    creation_time: int | None = None  # epoch ms
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None
    # application properties, typed, in order
    properties: TypedEntries = field(default_factory=list)
    # body
    body_kind: str = NO_BODY
    body: Any = None  # bytes (data), any value or TypedMap (value), list (sequence)

    def property(self, name: str, default: Any = None) -> Any:
        for key, _kind, value in self.properties:
            if key == name:
                return value
        return default


_PROPERTY_ORDER = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
                   "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
                   "group_id", "group_sequence", "reply_to_group_id")


def _property_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in ("content_type", "content_encoding"):
        return Symbol(value)
    if name in ("absolute_expiry_time", "creation_time"):
        return Timestamp(value)
    if name == "group_sequence":
        return UInt(value)
    return value


def encode_message(m: NeutralMessage) -> bytes:
    """The encoded AMQP sections of `m`: what the core's `Message.encoded` holds."""
    parts = []
    if m.durable or m.priority != 4 or m.ttl or m.delivery_count:
        parts.append(encode_header(m.durable, max(0, min(255, m.priority)), max(0, m.ttl), False,
                                   max(0, m.delivery_count)))
    if m.annotations:
        parts.append(encode_section(MESSAGE_ANNOTATIONS, {Symbol(k): v for k, v in m.annotations.items()}))
    fields = [_property_value(name, getattr(m, name)) for name in _PROPERTY_ORDER]
    while fields and fields[-1] is None:
        fields.pop()
    if fields:
        parts.append(encode_section(PROPERTIES, fields))
    if m.properties:
        parts.append(b"\x00\x53" + bytes((APPLICATION_PROPERTIES,)) + encode_typed_map(m.properties))
    if m.body_kind == DATA_BODY:
        parts.append(encode_section(DATA, bytes(m.body or b"")))
    elif m.body_kind == VALUE_BODY:
        body = m.body
        if isinstance(body, TypedMap):
            parts.append(b"\x00\x53" + bytes((AMQP_VALUE,)) + encode_typed_map(body.entries))
        else:
            parts.append(encode_section(AMQP_VALUE, body))
    elif m.body_kind == SEQUENCE_BODY:
        parts.append(encode_section(AMQP_SEQUENCE, list(m.body or [])))
    return b"".join(parts)


def envelope_of(encoded: bytes) -> Envelope:
    """What the core reads from every message (raises DecodeError on bytes that are not AMQP
    sections); with `encoded`, what `core.message.Message` is made of."""
    return Envelope(encoded)


def decode_message(encoded: bytes) -> NeutralMessage:
    """The sections of a stored message as values (a body of several `data` sections is joined;
    of several sequences, concatenated). Raises DecodeError on bytes that are not sections."""
    m = NeutralMessage()
    datas: list[bytes] = []
    sequences: list = []
    for descriptor, start, _end in sections(encoded):
        if descriptor == HEADER:
            fields = section_value(encoded, start) or []
            fields = list(fields) + [None] * (5 - len(fields))
            m.durable = bool(fields[0])
            m.priority = fields[1] if isinstance(fields[1], int) else 4
            m.ttl = fields[2] if isinstance(fields[2], int) else 0
            m.delivery_count = fields[4] if isinstance(fields[4], int) else 0
        elif descriptor == MESSAGE_ANNOTATIONS:
            value = section_value(encoded, start)
            m.annotations = {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}
        elif descriptor == PROPERTIES:
            value = section_value(encoded, start) or []
            for name, v in zip(_PROPERTY_ORDER, value):
                if v is not None:
                    setattr(m, name, str(v) if name in ("content_type", "content_encoding") else
                            int(v) if name in ("absolute_expiry_time", "creation_time", "group_sequence") else v)
        elif descriptor == APPLICATION_PROPERTIES:
            m.properties = typed_map_entries(encoded, _value_at(encoded, start))
        elif descriptor == DATA:
            datas.append(section_value(encoded, start))
        elif descriptor == AMQP_SEQUENCE:
            sequences.extend(section_value(encoded, start) or [])
            m.body_kind = SEQUENCE_BODY
        elif descriptor == AMQP_VALUE:
            at = _value_at(encoded, start)
            if encoded[at] in (0xC1, 0xD1):
                m.body = TypedMap(typed_map_entries(encoded, at))
            else:
                m.body = decode(encoded, at)[0]
            m.body_kind = VALUE_BODY
    if datas:
        m.body_kind, m.body = DATA_BODY, b"".join(datas)
    elif m.body_kind == SEQUENCE_BODY:
        m.body = sequences
    return m


def _value_at(encoded: bytes, start: int) -> int:
    if encoded[start + 1] == 0x53:
        return start + 3
    raise DecodeError(f"a section with a symbolic descriptor at {start}")


def jms_type(m: NeutralMessage) -> int:
    """The JMS message type of `m`: its `x-opt-jms-msg-type`, else as Qpid JMS types an AMQP body
    without it (string value: Text; binary value or data: Bytes; map value: Map; list value or
    sequence: Stream; other values: Object; no body: Message)."""
    kind = m.annotations.get(JMS_MSG_TYPE)
    if isinstance(kind, int) and 0 <= kind <= JMS_TEXT:
        return kind
    if m.body_kind == DATA_BODY:
        return JMS_OBJECT if m.content_type == "application/x-java-serialized-object" else JMS_BYTES
    if m.body_kind == SEQUENCE_BODY:
        return JMS_STREAM
    if m.body_kind == VALUE_BODY:
        body = m.body
        if body is None:
            return JMS_MESSAGE
        if isinstance(body, str):
            return JMS_TEXT
        if isinstance(body, bytes):
            return JMS_BYTES
        if isinstance(body, (dict, TypedMap)):
            return JMS_MAP
        if isinstance(body, list):
            return JMS_STREAM
        return JMS_OBJECT
    return JMS_MESSAGE


__all__ = ["DATA_BODY", "JMS_BYTES", "JMS_DEST", "JMS_MAP", "JMS_MESSAGE", "JMS_MSG_TYPE", "JMS_OBJECT",
           "JMS_REPLY_TO", "JMS_STREAM", "JMS_TEXT", "NO_BODY", "NeutralMessage", "QUEUE_KIND",
           "SEQUENCE_BODY", "TEMPORARY_QUEUE_KIND", "TEMPORARY_TOPIC_KIND", "TOPIC_KIND", "TypedMap",
           "UByte", "VALUE_BODY", "decode_message", "encode_message", "envelope_of", "jms_type"]
