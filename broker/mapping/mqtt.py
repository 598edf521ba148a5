"""MQTT PUBLISH <-> the protocol-neutral message, per the contract's table "Messages across
protocols" (column MQTT 5).

Into the broker: the payload is a `data` body, or an `amqp-value` string when the payload format
indicator is 1 (a TextMessage to JMS); QoS > 0 is `header.durable`; the message expiry interval
is `header.ttl` and `properties.absolute-expiry-time`; content type, correlation data (binary),
response topic (`properties.reply-to`, mapped to an address as topics are: `replies/d1` ->
`replies.d1`); user properties become string application properties (the last value of a
repeated name wins there). What only MQTT keeps travels in annotations
`x-opt-hermod-mqtt-*`: the QoS it was published at, and the user properties in order with their
repeats when a name repeats, so an MQTT subscriber gets back what the publisher sent.

Out of the broker: the reverse, for messages from any protocol. A body MQTT cannot carry (a map,
a sequence, another value) goes as its AMQP encoding with content type
`application/x-amqp-value`: never dropped.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..mqtt.errors import MqttError
from ..mqtt.properties import EMPTY, Properties
from ..mqtt.topics import address_to_topic, topic_to_address
from ..protocol.amqptypes import UByte, encode_typed_map
from ..protocol.amqptypes import encode as encode_value
from ..protocol.codec import APPLICATION_PROPERTIES, DATA, encode_section
from .neutral import DATA_BODY, SEQUENCE_BODY, VALUE_BODY, NeutralMessage, TypedMap, decode_message
from .neutral import encode_message as encode_neutral

QOS = "x-opt-hermod-mqtt-qos"
RETAIN = "x-opt-hermod-mqtt-retain"  # published with the retain flag (retain as published)
USER_PROPERTIES = "x-opt-hermod-mqtt-user-properties"
FORMAT = "x-opt-hermod-mqtt-format"  # an explicit payload format indicator 0
AMQP_VALUE_TYPE = "application/x-amqp-value"


@dataclass(slots=True)
class Outgoing:
    """What a PUBLISH to a subscriber is made of (the topic is the message's address, mapped)."""
    payload: bytes
    qos: int  # the QoS it was published at (0 for a non-durable message of another protocol)
    properties: Properties  # MQTT 5 properties (expiry filled in per delivery)
    expiration: int  # epoch ms, 0 = never


def to_neutral(payload: bytes, qos: int, properties: Properties, now_ms: int,
               retain: bool = False) -> NeutralMessage:
    """The neutral message of a PUBLISH (payload format already checked by the adapter)."""
    m = NeutralMessage(durable=qos > 0)
    m.annotations[QOS] = UByte(qos)
    if retain:
        m.annotations[RETAIN] = True
    p = properties
    if p is not EMPTY:
        if p.payload_format_indicator == 1:
            m.body_kind, m.body = VALUE_BODY, payload.decode("utf-8")
        else:
            m.body_kind, m.body = DATA_BODY, payload
            if p.payload_format_indicator == 0:
                m.annotations[FORMAT] = UByte(0)
        if p.message_expiry_interval is not None:
            m.ttl = p.message_expiry_interval * 1000
            m.absolute_expiry_time = now_ms + m.ttl
        m.content_type = p.content_type
        if p.response_topic is not None:
            m.reply_to = topic_to_address(p.response_topic)
        if p.correlation_data is not None:
            m.correlation_id = p.correlation_data
        users = p.user_properties
        if users:
            latest: dict[str, str] = {}
            for key, value in users:
                latest[key] = value
            m.properties = [(key, "string", value) for key, value in latest.items()]
            if len(latest) != len(users):
                m.annotations[USER_PROPERTIES] = [[key, value] for key, value in users]
    else:
        m.body_kind, m.body = DATA_BODY, payload
    return m


def _head(qos: int, retain: bool, durable: bool) -> bytes:
    m = NeutralMessage(durable=durable)
    m.annotations[QOS] = UByte(qos)
    if retain:
        m.annotations[RETAIN] = True
    return encode_neutral(m)


# The header and annotations of a PUBLISH without properties, per (retain, QoS), and of the
# durable copy a retained one is kept as: built once (the common case then costs one data
# section's encoding, not a NeutralMessage's).
_HEADS = {(retain, qos): _head(qos, retain, qos > 0) for retain in (False, True) for qos in range(3)}
_KEPT_HEADS = tuple(_head(qos, True, True) for qos in range(3))


def encode_publish(payload: bytes, qos: int, properties: Properties, now_ms: int, retain: bool = False) -> bytes:
    """The encoded AMQP sections of a PUBLISH: what the core stores and routes."""
    if properties is EMPTY:
        return _HEADS[retain, qos] + encode_section(DATA, payload)
    return encode_neutral(to_neutral(payload, qos, properties, now_ms, retain))


def encode_kept(payload: bytes, qos: int, properties: Properties, now_ms: int, key: str, address: str) -> bytes:
    """The durable copy of a retained PUBLISH, its address in the application property `key`."""
    if properties is EMPTY:
        return (_KEPT_HEADS[qos] + b"\x00\x53" + bytes((APPLICATION_PROPERTIES,))
                + encode_typed_map([(key, "string", address)]) + encode_section(DATA, payload))
    m = to_neutral(payload, qos, properties, now_ms, True)
    m.durable = True
    m.properties = [*m.properties, (key, "string", address)]
    return encode_neutral(m)


def _correlation_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, uuid.UUID):
        return str(value).encode()
    return str(value).encode("utf-8")


def _string(value: Any) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_HEAD_QOS = [(head, qos) for (_retain, qos), head in _HEADS.items()]


def _plain(encoded: bytes) -> Outgoing | None:
    """An MQTT PUBLISH without properties, as `encode_publish` wrote it (a prebuilt head, then
    one data section): read without decoding the sections. None for anything else."""
    for head, qos in _HEAD_QOS:
        if encoded.startswith(head):
            at = len(head)
            if encoded[at:at + 3] != b"\x00\x53\x75":
                return None
            code = encoded[at + 3] if len(encoded) > at + 3 else -1
            if code == 0xA0:
                start, size = at + 5, encoded[at + 4]
            elif code == 0xB0:
                start, size = at + 8, int.from_bytes(encoded[at + 4:at + 8], "big")
            else:
                return None
            if start + size != len(encoded):
                return None
            return Outgoing(encoded[start:], qos, EMPTY, 0)
    return None


def from_encoded(encoded: bytes, arrival_ms: int) -> Outgoing:
    """The MQTT form of a stored message (any protocol's); raises DecodeError on bytes that
    are not AMQP sections."""
    plain = _plain(encoded)
    if plain is not None:
        return plain
    m = decode_message(encoded)
    return from_neutral(m, arrival_ms)


def from_neutral(m: NeutralMessage, arrival_ms: int) -> Outgoing:
    values: dict[str, Any] = {}
    annotations = m.annotations
    body = m.body
    if m.body_kind == DATA_BODY:
        payload = bytes(body or b"")
        if annotations.get(FORMAT) == 0:
            values["payload_format_indicator"] = 0
    elif m.body_kind == VALUE_BODY and isinstance(body, str):
        payload = body.encode("utf-8")
        values["payload_format_indicator"] = 1
    elif m.body_kind == VALUE_BODY and isinstance(body, (bytes, bytearray)):
        payload = bytes(body)
    elif m.body_kind == VALUE_BODY and body is None:
        payload = b""
    elif m.body_kind in (VALUE_BODY, SEQUENCE_BODY):
        if isinstance(body, TypedMap):
            payload = encode_typed_map(body.entries)
        else:
            payload = encode_value(body)
        values["content_type"] = AMQP_VALUE_TYPE
    else:
        payload = b""
    qos = annotations.get(QOS)
    if not isinstance(qos, int) or not 0 <= qos <= 2:
        qos = 1 if m.durable else 0
    if m.content_type is not None and "content_type" not in values:
        values["content_type"] = m.content_type
    if m.reply_to is not None:
        try:
            values["response_topic"] = address_to_topic(m.reply_to)
        except MqttError:
            pass
    if m.correlation_id is not None:
        values["correlation_data"] = _correlation_bytes(m.correlation_id)
    ordered = annotations.get(USER_PROPERTIES)
    if isinstance(ordered, list) and all(isinstance(p, list) and len(p) == 2 for p in ordered):
        values["user_properties"] = tuple((str(k), str(v)) for k, v in ordered)
    elif m.properties:
        values["user_properties"] = tuple((str(k), _string(v)) for k, _kind, v in m.properties)
    expiration = m.absolute_expiry_time or (arrival_ms + m.ttl if m.ttl else 0)
    return Outgoing(payload, qos, Properties(**values) if values else EMPTY, expiration)


__all__ = ["AMQP_VALUE_TYPE", "Outgoing", "QOS", "RETAIN", "USER_PROPERTIES", "encode_kept", "encode_publish", "from_encoded",
           "from_neutral", "to_neutral"]
