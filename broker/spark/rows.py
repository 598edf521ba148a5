"""The `hermod` format's rows: a retained (or browsed) message as the contract's columns, and a
Spark row as an encoded AMQP message. Plain Python (no Spark, no Proton), so the executors' hot
loop is the codec's table-driven decoder and nothing else.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from broker.protocol import codec

from .amqp_types import encode_map, id_text, text, typed_map

COLUMNS = (
    ("id", "BIGINT"), ("address", "STRING"), ("routing_type", "STRING"), ("message_id", "STRING"),
    ("durable", "BOOLEAN"), ("priority", "INT"), ("creation_time", "TIMESTAMP"),
    ("arrival_time", "TIMESTAMP"), ("subject", "STRING"), ("group_id", "STRING"),
    ("properties", "MAP<STRING, STRING>"), ("property_types", "MAP<STRING, STRING>"),
    ("annotations", "MAP<STRING, STRING>"), ("body", "BINARY"), ("body_text", "STRING"),
)
SCHEMA = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def epoch_ms_to_datetime(ms: int | None) -> datetime | None:
    if not ms:
        return None
    return _EPOCH + timedelta(milliseconds=int(ms))


def message_columns(encoded: bytes) -> tuple:
    """(message_id, durable, priority, creation_time, subject, group_id, properties,
    property_types, annotations, body, body_text) of one encoded message."""
    envelope = codec.Envelope(encoded)
    props = envelope.properties_of(encoded)
    properties: dict[str, str | None] = {}
    property_types: dict[str, str] = {}
    for key, kind, value in typed_map(encoded, envelope.app_properties_at):
        name = str(key)
        properties[name] = text(kind, value)
        property_types[name] = kind
    annotations = {str(key): text(kind, value)
                   for key, kind, value in typed_map(encoded, _annotations_at(encoded, envelope))}
    body, body_text = _body(encoded, props.get("content_type"))
    subject, group_id = props.get("subject"), props.get("group_id")
    return (
        id_text(props.get("message_id")),
        bool(envelope.durable),
        int(envelope.priority),
        epoch_ms_to_datetime(props.get("creation_time")),
        None if subject is None else str(subject),
        None if group_id is None else str(group_id),
        properties, property_types, annotations, body, body_text,
    )


def retained_row(row_id: int, address: str, routing_type: str | None, arrival_ms: int,
                 encoded: bytes) -> tuple:
    cols = message_columns(encoded)
    return (row_id, address, routing_type, *cols[:4], epoch_ms_to_datetime(arrival_ms), *cols[4:])


def browsed_row(position: int, address: str, encoded: bytes) -> tuple:
    cols = message_columns(encoded)
    return (position, address, None, *cols[:4], None, *cols[4:])


def _annotations_at(encoded: bytes, envelope: codec.Envelope) -> int:
    if not envelope.annotations:
        return -1
    for descriptor, start, _end in codec.sections(encoded):
        if descriptor == codec.MESSAGE_ANNOTATIONS:
            return start
        if descriptor >= codec.PROPERTIES:
            break
    return -1


def _body(encoded: bytes, content_type: Any) -> tuple[bytes | None, str | None]:
    """(body bytes, body text) as the contract's `body` and `body_text` columns."""
    data: list[bytes] = []
    for descriptor, start, end in codec.sections(encoded):
        if descriptor == codec.DATA:
            data.append(codec.section_value(encoded, start))
        elif descriptor == codec.AMQP_VALUE:
            value_at = start + 3 if encoded[start + 1] == 0x53 else codec.skip(encoded, start + 1)
            code = encoded[value_at]
            if code in (0xA1, 0xB1):
                value = codec.decode(encoded, value_at)[0]
                return value.encode(), value
            return bytes(encoded[value_at:end]), None
        elif descriptor == codec.AMQP_SEQUENCE:
            body_end = end
            for d, _s, e in codec.sections(encoded):
                if d == codec.AMQP_SEQUENCE:
                    body_end = e
            return bytes(encoded[start:body_end]), None
    if not data:
        return None, None
    body = b"".join(data)
    if content_type is not None and str(content_type).lower().startswith("text/"):
        return body, body.decode("utf-8", errors="replace")
    return body, None


# -- writing --------------------------------------------------------------------------------------


def encode_message(body_kind: str, body: Any, *, durable: bool, priority: int | None = None,
                   message_id: str | None = None, subject: str | None = None,
                   group_id: str | None = None,
                   application_properties: list[tuple[str, str, Any]] | None = None) -> bytes:
    """An AMQP message: header, properties (when any field is set), application properties
    (key, type name, value) and the body (`string`: an amqp-value string, `binary`: one data
    section, `null`: an amqp-value null)."""
    parts = [codec.encode_header(bool(durable), 4 if priority is None else int(priority), 0,
                                 False, 0)]
    fields = [message_id, None, None, subject, None, None, None, None, None, None, group_id]
    while fields and fields[-1] is None:
        fields.pop()
    if fields:
        parts.append(codec.encode_section(codec.PROPERTIES, fields))
    if application_properties:
        parts.append(b"\x00\x53" + bytes((codec.APPLICATION_PROPERTIES,))
                     + encode_map(application_properties))
    if body_kind == "binary":
        parts.append(codec.encode_section(codec.DATA, bytes(body)))
    elif body_kind == "string":
        parts.append(codec.encode_section(codec.AMQP_VALUE, str(body)))
    else:
        parts.append(codec.encode_section(codec.AMQP_VALUE, None))
    return b"".join(parts)
