"""OpenWire (ActiveMQ Classic JMS) messages <-> the protocol-neutral message, following the
contract's table "Messages across protocols" and the OASIS AMQP JMS mapping:

- body: TextMessage = amqp-value string, BytesMessage = data, MapMessage = amqp-value map,
  StreamMessage = amqp-sequence, ObjectMessage = data with `application/x-java-serialized-object`,
  plain Message = no body; `x-opt-jms-msg-type` says which;
- headers: JMSMessageID = message-id (the client's `ID:...` text), JMSCorrelationID =
  correlation-id, JMSReplyTo = reply-to with `x-opt-jms-reply-to`, the destination's kind in
  `x-opt-jms-dest`, JMSType = subject, JMSDeliveryMode = durable, JMSPriority = priority,
  JMSExpiration = absolute-expiry-time, JMSTimestamp = creation-time, JMSXGroupID/Seq =
  group-id/sequence, JMSXUserID = user-id; typed properties keep their Java types as AMQP types.

What only OpenWire has (compression) travels in `x-opt-hermod-openwire-*` annotations, so an
OpenWire consumer gets the message as Classic would deliver it and nobody else sees it as a
property. A compressed body is stored inflated (every protocol reads it) and compressed again
for an OpenWire consumer.
"""
from __future__ import annotations

import struct
from typing import Any

from ..openwire import OpenWireError, bodies, model
from ..openwire.engine import Marshaller
from ..openwire.values import Byte, Char, Float, Long, Short
from ..protocol.amqptypes import DecodeError, decode_typed, encode_as
from ..protocol.codec import AMQP_SEQUENCE, sections
from .neutral import (DATA_BODY, JMS_BYTES, JMS_DEST, JMS_MAP, JMS_MESSAGE, JMS_MSG_TYPE, JMS_OBJECT,
                      JMS_REPLY_TO, JMS_STREAM, JMS_TEXT, NO_BODY, QUEUE_KIND, SEQUENCE_BODY,
                      TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND, TOPIC_KIND, VALUE_BODY, NeutralMessage,
                      TypedMap, decode_message, encode_message, jms_type)

COMPRESSED = "x-opt-hermod-openwire-compressed"
DATA_STRUCTURE = "x-opt-hermod-openwire-data-structure"  # an advisory's command, marshalled
SCHEDULED_DELAY = "AMQ_SCHEDULED_DELAY"  # Classic's scheduled delivery property (ms)
DELIVERY_DELAY = "x-opt-delivery-delay"
OBJECT_CONTENT_TYPE = "application/x-java-serialized-object"

_CLASS_OF = {JMS_MESSAGE: model.ActiveMQMessage, JMS_OBJECT: model.ActiveMQObjectMessage,
             JMS_MAP: model.ActiveMQMapMessage, JMS_BYTES: model.ActiveMQBytesMessage,
             JMS_STREAM: model.ActiveMQStreamMessage, JMS_TEXT: model.ActiveMQTextMessage}
_TYPE_OF = {cls: kind for kind, cls in _CLASS_OF.items()}
_DEST_KIND = {model.Queue: QUEUE_KIND, model.Topic: TOPIC_KIND, model.TempQueue: TEMPORARY_QUEUE_KIND,
              model.TempTopic: TEMPORARY_TOPIC_KIND}
_DEST_CLASS = {kind: cls for cls, kind in _DEST_KIND.items()}


# -- typed values ---------------------------------------------------------------------------------

def amqp_kind(value: Any) -> str:
    """The AMQP type a Java value keeps (a Java int stays an int, a short a short...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Byte):
        return "byte"
    if isinstance(value, Short):
        return "short"
    if isinstance(value, Long):
        return "long"
    if isinstance(value, int):
        return "int" if -(1 << 31) <= value < (1 << 31) else "long"
    if isinstance(value, Float):
        return "float"
    if isinstance(value, float):
        return "double"
    if isinstance(value, Char):
        return "char"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    return "string"  # str, and (Classic's nested map and list properties) their text


def java_value(kind: str, value: Any) -> Any:
    """An AMQP typed value as the Java type a JMS client reads (Qpid JMS's choices for the
    unsigned types: the next wider signed type)."""
    if value is None:
        return None
    if kind == "boolean":
        return bool(value)
    if kind == "byte":
        return Byte(value)
    if kind in ("short", "ubyte"):
        return Short(value)
    if kind in ("int", "ushort"):
        return int(value)
    if kind in ("long", "uint", "ulong", "timestamp"):
        return Long(value)
    if kind == "float":
        return Float(value)
    if kind == "double":
        return float(value)
    if kind == "char":
        return Char(value)
    if kind == "binary":
        return bytes(value)
    if isinstance(value, (str, int, float, bytes)):
        return value if isinstance(value, str) else str(value)
    return str(value)


def _typed_entries(values: dict[str, Any] | None) -> list[tuple[Any, str, Any]]:
    return [(k, amqp_kind(v), v if not isinstance(v, (dict, list)) else str(v)) for k, v in (values or {}).items()]


def _java_map(entries) -> dict[str, Any]:
    return {str(k): java_value(kind, v) for k, kind, v in entries}


# -- message ids and destinations -------------------------------------------------------------------

def message_id_text(mid: model.MessageId | None) -> str | None:
    """JMSMessageID as the Classic client shows it: `producerId:sequence`."""
    if mid is None:
        return None
    if mid.text_view:
        return mid.text_view
    p = mid.producer_id
    if p is None:
        return None
    return f"{p.connection_id}:{p.session_id}:{p.value}:{mid.producer_sequence_id}"


def parse_message_id(text: Any, broker_sequence: int) -> model.MessageId:
    """The MessageId a Classic client is given for a stored message: parsed back from an
    OpenWire producer's text (so JMSMessageID is what the producer saw), else a text view of
    another protocol's id; `broker_sequence` (the broker's message id) is what acks name."""
    if isinstance(text, str):
        parts = text.rsplit(":", 3)
        if len(parts) == 4 and all(p.lstrip("-").isdigit() for p in parts[1:]):
            conn, session, producer, seq = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
            return model.MessageId(None, model.ProducerId(conn, producer, session), seq, broker_sequence)
    shown = text if isinstance(text, str) else f"ID:AMQP_{type(text).__name__.upper()}:{text}" if text is not None \
        else f"ID:hermod:{broker_sequence}"
    if not shown.startswith("ID:"):
        shown = "ID:" + shown
    return model.MessageId(shown, model.ProducerId("ID:hermod", 0, 0), broker_sequence, broker_sequence)


def destination_name(d: model.Destination | None) -> str | None:
    return d.physical_name if d is not None else None


def destination_of(name: str | None, kind: Any) -> model.Destination | None:
    if name is None:
        return None
    cls = _DEST_CLASS.get(kind if isinstance(kind, int) else QUEUE_KIND, model.Queue)
    return cls(name)


# -- OpenWire -> neutral --------------------------------------------------------------------------

def to_neutral(msg: model.Message, limit: int) -> NeutralMessage:
    """The neutral form of an OpenWire message (raises OpenWireError for a body that does not
    decode, or that inflates past `limit`)."""
    n = NeutralMessage()
    n.durable = bool(msg.persistent)
    n.priority = max(0, min(9, msg.priority))
    kind = _TYPE_OF.get(type(msg), JMS_MESSAGE)
    n.annotations[JMS_MSG_TYPE] = kind
    if msg.destination is not None:
        n.annotations[JMS_DEST] = _DEST_KIND.get(type(msg.destination), QUEUE_KIND)
        n.to = msg.destination.physical_name
    if msg.reply_to is not None:
        n.annotations[JMS_REPLY_TO] = _DEST_KIND.get(type(msg.reply_to), QUEUE_KIND)
        n.reply_to = msg.reply_to.physical_name
    if msg.compressed:
        n.annotations[COMPRESSED] = True
    n.message_id = message_id_text(msg.message_id)
    n.correlation_id = msg.correlation_id
    n.subject = msg.type
    if msg.user_id:
        n.user_id = msg.user_id.encode()
    if msg.expiration:
        n.absolute_expiry_time = msg.expiration
    if msg.timestamp:
        n.creation_time = msg.timestamp
    n.group_id = msg.group_id
    if msg.group_sequence:
        n.group_sequence = msg.group_sequence
    n.properties = _typed_entries(msg.properties)
    delay = (msg.properties or {}).get(SCHEDULED_DELAY)
    if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
        n.annotations[DELIVERY_DELAY] = Long(delay)
    if msg.data_structure is not None:
        n.annotations[DATA_STRUCTURE] = Marshaller(12).encode(msg.data_structure)
    c = msg.compressed
    if kind == JMS_TEXT:
        n.body_kind, n.body = VALUE_BODY, bodies.decode_text(msg.content, c, limit)
    elif kind == JMS_BYTES:
        n.body_kind, n.body = DATA_BODY, bodies.decode_bytes(msg.content, c, limit)
    elif kind == JMS_MAP:
        n.body_kind, n.body = VALUE_BODY, TypedMap(_typed_entries(bodies.decode_map_body(msg.content, c, limit)))
    elif kind == JMS_STREAM:
        n.body_kind = SEQUENCE_BODY
        n.body = [TypedValue(amqp_kind(v), v) for v in bodies.decode_stream_body(msg.content, c, limit)]
    elif kind == JMS_OBJECT:
        n.body_kind, n.body = DATA_BODY, bodies.decode_object_body(msg.content, c, limit)
        n.content_type = OBJECT_CONTENT_TYPE
    return n


class TypedValue:
    """One StreamMessage element with its Java type, for the typed amqp-sequence."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind, self.value = kind, value


def encode(msg: model.Message, limit: int) -> bytes:
    """The encoded AMQP sections the core keeps for an OpenWire message."""
    return encode_neutral(to_neutral(msg, limit))


def dest_kind(routing_type: str, temporary: bool = False) -> int:
    """`x-opt-jms-dest` for a destination of that routing type."""
    if routing_type == "multicast":
        return TEMPORARY_TOPIC_KIND if temporary else TOPIC_KIND
    return TEMPORARY_QUEUE_KIND if temporary else QUEUE_KIND


def encode_neutral(n: NeutralMessage) -> bytes:
    """`encode_message`, with a StreamMessage's elements keeping their Java types."""
    if n.body_kind == SEQUENCE_BODY and n.body and isinstance(n.body[0], TypedValue):
        items = n.body
        n.body_kind, n.body = NO_BODY, None
        try:
            return encode_message(n) + _typed_sequence(items)
        finally:
            n.body_kind, n.body = SEQUENCE_BODY, items
    return encode_message(n)


def _typed_sequence(items: list[TypedValue]) -> bytes:
    parts = [encode_as(i.kind, i.value) for i in items]
    body = b"".join(parts)
    if not parts:
        value = b"\x45"
    elif len(body) + 1 < 256 and len(parts) < 256:
        value = bytes((0xC0, len(body) + 1, len(parts))) + body
    else:
        value = b"\xd0" + struct.pack(">II", len(body) + 4, len(parts)) + body
    return b"\x00\x53" + bytes((AMQP_SEQUENCE,)) + value


# -- neutral -> OpenWire --------------------------------------------------------------------------

def _typed_sequence_values(encoded: bytes) -> list[Any]:
    """The elements of the message's amqp-sequence sections, with their Java types."""
    out: list[Any] = []
    for descriptor, start, end in sections(encoded):
        if descriptor != AMQP_SEQUENCE:
            continue
        at = start + 3
        code = encoded[at]
        if code == 0x45:
            continue
        if code == 0xC0:
            count, p = encoded[at + 2], at + 3
        elif code == 0xD0:
            count, p = struct.unpack_from(">I", encoded, at + 5)[0], at + 9
        else:
            raise DecodeError("amqp-sequence is not a list")
        for _ in range(count):
            kind, value, p = decode_typed(encoded, p)
            out.append(java_value(kind, value))
    return out


def from_stored(encoded: bytes, message_id: int, delivery_count: int) -> model.Message:
    """The OpenWire message a Classic client gets for a stored message of any protocol
    (raises DecodeError for bytes that are not AMQP sections)."""
    n = decode_message(encoded)
    kind = jms_type(n)
    cls = _CLASS_OF[kind]
    msg = cls()
    msg.message_id = parse_message_id(n.message_id, message_id)
    msg.persistent = n.durable
    msg.priority = max(0, min(9, n.priority))
    msg.destination = destination_of(n.to, n.annotations.get(JMS_DEST)) if n.to else None
    msg.reply_to = destination_of(n.reply_to, n.annotations.get(JMS_REPLY_TO)) if n.reply_to else None
    cid = n.correlation_id
    msg.correlation_id = cid if isinstance(cid, str) or cid is None else str(cid)
    msg.type = n.subject
    if n.user_id is not None:
        msg.user_id = n.user_id.decode(errors="replace") if isinstance(n.user_id, bytes) else str(n.user_id)
    msg.expiration = n.absolute_expiry_time or 0
    msg.timestamp = n.creation_time or 0
    msg.group_id = n.group_id
    msg.group_sequence = n.group_sequence or 0
    msg.redelivery_counter = delivery_count
    props = _java_map(n.properties)
    msg.properties = props or None
    ds = n.annotations.get(DATA_STRUCTURE)
    if isinstance(ds, bytes):
        try:
            msg.data_structure = Marshaller(12).decode(ds)
        except OpenWireError:
            msg.data_structure = None
    compressed = bool(n.annotations.get(COMPRESSED))
    msg.compressed = compressed
    body = n.body
    if kind == JMS_TEXT:
        msg.content = bodies.encode_text(body if isinstance(body, str) else None if body is None else str(body),
                                         compressed)
    elif kind == JMS_BYTES:
        data = body if isinstance(body, (bytes, bytearray)) else b""
        msg.content = bodies.encode_bytes(bytes(data), compressed) if data or compressed else None
    elif kind == JMS_MAP:
        values = _java_map(body.entries) if isinstance(body, TypedMap) else \
            {str(k): v for k, v in body.items()} if isinstance(body, dict) else {}
        msg.content = bodies.encode_map_body(values, compressed)
    elif kind == JMS_STREAM:
        items: list[Any] = _typed_sequence_values(encoded) if n.body_kind == SEQUENCE_BODY else \
            list(body) if isinstance(body, list) else []
        msg.content = bodies.encode_stream_body(items, compressed)
    elif kind == JMS_OBJECT:
        data = body if isinstance(body, (bytes, bytearray)) else b""
        msg.content = (bodies.deflate(bytes(data)) if compressed else bytes(data)) if data else None
    return msg


def from_native(sent: model.Message, message_id: int, delivery_count: int) -> model.Message:
    """What `from_stored` gives for a message an OpenWire producer sent as `sent` (kept in
    memory beside the stored form: `core.message.Message.native`), without decoding and
    re-mapping the stored form: the same fields, taken from the producer's own."""
    msg = type(sent)()
    mid = sent.message_id
    if mid is not None and mid.producer_id is not None:
        msg.message_id = model.MessageId(mid.text_view, mid.producer_id, mid.producer_sequence_id, message_id)
    else:
        msg.message_id = parse_message_id(message_id_text(mid), message_id)
    msg.persistent = bool(sent.persistent)
    msg.priority = max(0, min(9, sent.priority))
    msg.destination = sent.destination
    msg.reply_to = sent.reply_to
    msg.correlation_id = sent.correlation_id
    msg.type = sent.type
    msg.user_id = sent.user_id or None
    msg.expiration = sent.expiration
    msg.timestamp = sent.timestamp
    msg.group_id = sent.group_id
    msg.group_sequence = sent.group_sequence
    msg.redelivery_counter = delivery_count
    msg.properties = sent.properties or None
    msg.data_structure = sent.data_structure
    msg.compressed = sent.compressed
    msg.content = sent.content
    return msg


__all__ = ["COMPRESSED", "DATA_STRUCTURE", "JMS_DEST", "dest_kind", "encode_neutral", "amqp_kind", "destination_of", "encode", "from_native", "from_stored", "java_value",
           "message_id_text", "parse_message_id", "to_neutral"]
