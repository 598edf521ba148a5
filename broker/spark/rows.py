"""The `hermod` format's rows: a retained (or browsed) message as the contract's columns, and a
Spark row as an encoded AMQP message. Plain Python (no Spark, no Proton), so the executors' hot
loop is the codec's table-driven decoder and nothing else.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hermod.broker.protocol import codec

from .amqp_types import encode_map, id_text, typed_text_map

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
    """(message_id, durable, priority, creation_time ms or None, subject, group_id, properties,
    property_types, annotations, body, body_text) of one encoded message, in one pass over
    its sections."""
    durable, priority = False, 4
    props: list = []
    properties: dict[str, str | None] = {}
    property_types: dict[str, str] = {}
    annotations: dict[str, str | None] = {}
    data: list[bytes] = []
    body: bytes | None = None
    body_text: str | None = None
    section_value = codec.section_value
    for descriptor, start, end in codec.sections(encoded):
        if descriptor == codec.HEADER:
            header = section_value(encoded, start)
            if header:
                durable = bool(header[0])
                if len(header) > 1 and header[1] is not None:
                    priority = int(header[1])
        elif descriptor == codec.MESSAGE_ANNOTATIONS:
            for key, _kind, found in typed_text_map(encoded, start):
                annotations[str(key)] = found
        elif descriptor == codec.PROPERTIES:
            found = section_value(encoded, start)
            props = found if isinstance(found, list) else []
        elif descriptor == codec.APPLICATION_PROPERTIES:
            for key, kind, found in typed_text_map(encoded, start):
                name = str(key)
                properties[name] = found
                property_types[name] = kind
        elif descriptor == codec.DATA:
            data.append(section_value(encoded, start))
        elif descriptor == codec.AMQP_VALUE and body is None and not data:
            value_at = start + 3 if encoded[start + 1] == 0x53 else codec.skip(encoded, start + 1)
            if encoded[value_at] in (0xA1, 0xB1):
                body_text = codec.decode(encoded, value_at)[0]
                body = body_text.encode()
            elif encoded[value_at] in (0xA0, 0xB0):  # binary: those bytes, not their encoding
                body = codec.decode(encoded, value_at)[0]
            else:
                body = bytes(encoded[value_at:end])
        elif descriptor == codec.AMQP_SEQUENCE and not data:
            # Every sequence section, as encoded (descriptors included).
            body = (body or b"") + bytes(encoded[start:end])
    if data:
        body = b"".join(data)
        content_type = props[6] if len(props) > 6 else None
        if content_type is not None and str(content_type).lower().startswith("text/"):
            body_text = body.decode("utf-8", errors="replace")
    count = len(props)
    message_id = id_text(props[0]) if count else None
    subject = props[3] if count > 3 else None
    creation = props[9] if count > 9 else None
    group_id = props[10] if count > 10 else None
    return (
        message_id, durable, 9 if priority > 9 else priority, int(creation) if creation else None,
        None if subject is None else str(subject),
        None if group_id is None else str(group_id),
        properties, property_types, annotations, body, body_text,
    )


def retained_row(row_id: int, address: str, routing_type: str | None, arrival_ms: int,
                 encoded: bytes) -> tuple:
    """The contract's columns as Python values (timestamps as datetimes)."""
    cols = message_columns(encoded)
    return (row_id, address, routing_type, *cols[:3], epoch_ms_to_datetime(cols[3]),
            epoch_ms_to_datetime(arrival_ms), *cols[4:])


def browsed_row(position: int, address: str, encoded: bytes) -> tuple:
    cols = message_columns(encoded)
    return (position, address, None, *cols[:3], epoch_ms_to_datetime(cols[3]), None, *cols[4:])


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
