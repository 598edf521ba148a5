"""STOMP frames <-> the protocol-neutral message, following the contract's table ("Messages across
protocols"): the named headers map to AMQP properties and header fields, every other header
becomes a string application property, and the body follows the text-or-bytes rule (text: an
`amqp-value` string; bytes: one `data` section), with `x-opt-jms-msg-type` saying which, so a
JMS-over-AMQP consumer gets a TextMessage or a BytesMessage.

On the way out a body STOMP cannot carry as such (a map, a list, any other AMQP value) is
delivered as its AMQP encoding with `content-type: application/x-amqp-value`: never dropped.
A text body goes back in the charset its `content-type` names (the producer's own bytes for a
STOMP producer), else UTF-8.
"""
from __future__ import annotations

import codecs
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..protocol.amqptypes import encode, skip
from ..protocol.codec import AMQP_SEQUENCE, AMQP_VALUE, section_value, sections
from .neutral import (DATA_BODY, JMS_BYTES, JMS_DEST, JMS_MSG_TYPE, JMS_REPLY_TO, JMS_TEXT, NO_BODY,
                      QUEUE_KIND, SEQUENCE_BODY, TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND, TOPIC_KIND,
                      VALUE_BODY, NeutralMessage, decode_message)

AMQP_VALUE_TYPE = "application/x-amqp-value"

# Headers that say how the frame is handled, never copied into the message.
FRAME_HEADERS = frozenset({"destination", "content-length", "receipt", "transaction", "amq-msg-type",
                           "destination-type", "subscription-type", "message-id", "ack", "subscription",
                           "redelivered", "timestamp"})
# Headers the table maps to AMQP fields (read here, not copied as properties).
MAPPED_HEADERS = frozenset({"correlation-id", "reply-to", "type", "persistent", "priority", "expires",
                            "JMSXGroupID", "content-type"})

# reply-to prefixes and the x-opt-jms-reply-to kinds they stand for.
_REPLY_PREFIXES = (("/queue/", QUEUE_KIND), ("/topic/", TOPIC_KIND),
                   ("/temp-queue/", TEMPORARY_QUEUE_KIND), ("/temp-topic/", TEMPORARY_TOPIC_KIND))

TempResolver = Callable[[str, str], str]  # (N of /temp-queue/N, "anycast" | "multicast") -> its address


class MappingError(ValueError):
    """A header the mapping cannot accept (for the ERROR frame's `message`)."""


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise MappingError(f"header {name} must be an integer, not {value[:40]!r}") from None


def _reply_to(value: str, resolve_temp: TempResolver | None) -> tuple[str, int | None]:
    for prefix, kind in _REPLY_PREFIXES:
        if value.startswith(prefix) and len(value) > len(prefix):
            name = value[len(prefix):]
            if kind in (TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND) and resolve_temp is not None:
                name = resolve_temp(name, "anycast" if kind == TEMPORARY_QUEUE_KIND else "multicast")
            return name, kind
    return value, None


def from_send(headers: Mapping[str, str], ordered: tuple[tuple[str, str], ...], body: str | bytes,
              message_id: str, routing: str | None, now_ms: int,
              resolve_temp: TempResolver | None = None) -> NeutralMessage:
    """The neutral message of a SEND: `headers` the first occurrence of each (the one that
    counts), `ordered` every header line in order, `body` from `stomp.send_body` (str: text)."""
    m = NeutralMessage(message_id=message_id, creation_time=now_ms)
    m.durable = headers.get("persistent", "").strip().lower() == "true"
    priority = _int_header(headers, "priority")
    if priority is not None:
        m.priority = max(0, min(9, priority))
    expires = _int_header(headers, "expires")
    if expires:
        m.absolute_expiry_time = expires
    m.correlation_id = headers.get("correlation-id")
    m.subject = headers.get("type")
    m.group_id = headers.get("JMSXGroupID")
    m.content_type = headers.get("content-type")
    annotations: dict[str, Any] = {}
    reply = headers.get("reply-to")
    if reply:
        m.reply_to, kind = _reply_to(reply, resolve_temp)
        if kind is not None:
            annotations[JMS_REPLY_TO] = kind
    if routing is not None:
        annotations[JMS_DEST] = TOPIC_KIND if routing == "multicast" else QUEUE_KIND
    seen: set[str] = set()
    for name, value in ordered:
        if name in seen or name in FRAME_HEADERS or name in MAPPED_HEADERS:
            continue
        seen.add(name)
        m.properties.append((name, "string", value))
    if isinstance(body, str):
        annotations[JMS_MSG_TYPE] = JMS_TEXT
        m.body_kind, m.body = VALUE_BODY, body
    else:
        annotations[JMS_MSG_TYPE] = JMS_BYTES
        m.body_kind, m.body = DATA_BODY, body
    m.annotations = annotations
    return m


def _text(value: Any) -> str:
    """A typed AMQP value as a STOMP header string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if value is None:
        return ""
    return str(value)


def _charset(content_type: str | None) -> str:
    if content_type:
        for param in content_type.split(";")[1:]:
            key, eq, value = param.partition("=")
            if eq and key.strip().lower() == "charset":
                try:
                    return codecs.lookup(value.strip().strip('"')).name
                except LookupError:
                    break
    return "utf-8"


def _raw_body_value(encoded: bytes) -> bytes:
    """The encoded value of an `amqp-value` body, or of the `amqp-sequence` sections as one list
    (their AMQP encoding, types kept)."""
    seq: list = []
    for descriptor, start, end in sections(encoded):
        if descriptor == AMQP_VALUE:
            at = start + 3 if encoded[start + 1] == 0x53 else skip(encoded, start + 1)
            return bytes(encoded[at:end])
        if descriptor == AMQP_SEQUENCE:
            seq.extend(section_value(encoded, start) or [])
    return encode(seq)


def body_of(m: NeutralMessage, encoded: bytes) -> tuple[bytes, str | None]:
    """The MESSAGE body and the content-type it needs (None: the message's own)."""
    if m.body_kind == DATA_BODY:
        return bytes(m.body or b""), None
    if m.body_kind == NO_BODY:
        return b"", None
    if m.body_kind == VALUE_BODY:
        body = m.body
        if body is None:
            return b"", None
        if isinstance(body, str):
            try:
                return body.encode(_charset(m.content_type)), None
            except UnicodeEncodeError:
                return body.encode(), "text/plain; charset=utf-8"
        if isinstance(body, bytes):
            return body, None
        return _raw_body_value(encoded), AMQP_VALUE_TYPE
    if m.body_kind == SEQUENCE_BODY:
        return _raw_body_value(encoded), AMQP_VALUE_TYPE
    return b"", None


# The last messages decoded for delivery, by the identity of their encoded bytes (kept, so the
# identity cannot be reused): a topic's message reaching several STOMP subscribers is decoded once.
_DECODED: dict[int, tuple[bytes, NeutralMessage, bytes, str | None]] = {}
DECODED_KEPT = 64


def _decoded(encoded: bytes) -> tuple[NeutralMessage, bytes, str | None]:
    hit = _DECODED.get(id(encoded))
    if hit is not None and hit[0] is encoded:
        return hit[1], hit[2], hit[3]
    m = decode_message(encoded)
    body, content_type = body_of(m, encoded)
    if len(_DECODED) >= DECODED_KEPT:
        del _DECODED[next(iter(_DECODED))]
    _DECODED[id(encoded)] = (encoded, m, body, content_type)
    return m, body, content_type


def to_message(encoded: bytes, destination: str, name_of: Callable[[str, int], str], fallback_id: str,
               redelivered: bool) -> tuple[list[tuple[str, str]], bytes]:
    """(headers, body) of a MESSAGE frame for a stored message: `destination` its STOMP name,
    `name_of(address, kind)` the STOMP name of a reply-to address of an x-opt-jms-reply-to kind,
    `fallback_id` the `message-id` when the message has none. The caller adds `subscription` and
    `ack` in front."""
    m, body, content_type = _decoded(encoded)
    headers: list[tuple[str, str]] = [
        ("message-id", _text(m.message_id) if m.message_id is not None else fallback_id),
        ("destination", destination)]
    content_type = content_type or m.content_type
    if content_type:
        headers.append(("content-type", content_type))
    if m.correlation_id is not None:
        headers.append(("correlation-id", _text(m.correlation_id)))
    if m.reply_to:
        kind = m.annotations.get(JMS_REPLY_TO)
        headers.append(("reply-to", name_of(m.reply_to, kind if isinstance(kind, int) else -1)))
    if m.subject is not None:
        headers.append(("type", m.subject))
    if m.durable:
        headers.append(("persistent", "true"))
    headers.append(("priority", str(m.priority)))
    expires = m.absolute_expiry_time or ((m.creation_time + m.ttl) if m.ttl and m.creation_time else 0)
    headers.append(("expires", str(expires or 0)))
    if m.creation_time:
        headers.append(("timestamp", str(m.creation_time)))
    if m.group_id is not None:
        headers.append(("JMSXGroupID", m.group_id))
    if redelivered:
        headers.append(("redelivered", "true"))
    taken = {name for name, _ in headers} | FRAME_HEADERS
    for key, _kind, value in m.properties:
        name = _text(key)
        if name and name not in taken:
            taken.add(name)
            headers.append((name, _text(value)))
    return headers, body


__all__ = ["AMQP_VALUE_TYPE", "MappingError", "body_of", "from_send", "to_message"]
