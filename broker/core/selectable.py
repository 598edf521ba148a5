"""What a selector sees of a message: identifier -> value.

`message_lookup(msg)` gives the property lookup that `broker.selector` predicates call. The
message is duck-typed (durable, priority, message_id, correlation_id, user_id, subject,
creation_time, group_id, group_sequence, expiration, address, size, annotations,
application_properties, container_id) and read lazily: a selector that only names headers never
makes the message decode its application properties.

Resolution order (docs/selectors.md, "Identifiers"):

1. The header identifiers below (JMS* and AMQ* names, `__AMQ_CID`). They are mapped for every
   filter: consumer selectors, subscription queues, queue and divert filters alike (Artemis maps
   several of them only on consumer filters). An application property cannot shadow them.
2. Application properties, by exact name.
3. `m.<key>`: the message annotation `<key>`; `_AMQ_<NAME>`: the annotation `x-opt-<NAME>` with
   `_` written as `-` (`_AMQ_ORIG_ADDRESS` -> `x-opt-ORIG-ADDRESS`).
4. Anything else is NULL.

Values are the exact Python types the selector understands (str, int, float, bool, bytes);
header values are normalised to them here. Application property and annotation values pass
through untouched: an AMQP symbol, char or timestamp arrives as a subclass and stays opaque.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable

Lookup = Callable[[str], object]

_MISSING = object()
_EMPTY: dict = {}


def _text(value) -> str | None:
    return None if value is None else str(value)


def _message_id(value) -> str | None:
    """JMSMessageID / AMQUserID: `ID:` and the id's text (Artemis), binary as qpid-jms encodes it."""
    if value is None:
        return None
    if isinstance(value, str):
        text = str(value)
        return text if text.startswith("ID:") else "ID:" + text
    if isinstance(value, (bytes, bytearray)):
        return "ID:AMQP_BINARY:" + bytes(value).hex().upper()
    return "ID:" + str(value)  # uuid.UUID, ulong


def _correlation_id(value):
    """JMSCorrelationID: a string as it is; UUID and ulong with their qpid-jms type prefix;
    binary stays bytes, which never equals a string literal."""
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, uuid.UUID):
        return "ID:AMQP_UUID:" + str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return "ID:AMQP_ULONG:" + str(int(value))
    return value


def _int_or_zero(value) -> int:
    return 0 if value is None else int(value)


def _priority(msg) -> int:
    p = msg.priority
    return 4 if p is None else int(p)


def _user_id(msg) -> str | None:
    value = msg.user_id
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")  # as Java's new String(bytes, UTF_8)
    return str(value)


def _always_null(msg):
    return None


# Any: the message is duck-typed (the module docstring lists what it must answer).
HEADERS: dict[str, Callable[[Any], object]] = {
    # JMS header names (also on subscriptions: no Artemis rewrite quirk).
    "JMSMessageID": lambda m: _message_id(m.message_id),
    "JMSCorrelationID": lambda m: _correlation_id(m.correlation_id),
    "JMSType": lambda m: _text(m.subject),
    "JMSPriority": _priority,
    "JMSDeliveryMode": lambda m: "PERSISTENT" if m.durable else "NON_PERSISTENT",
    "JMSTimestamp": lambda m: _int_or_zero(m.creation_time),
    "JMSExpiration": lambda m: _int_or_zero(m.expiration),
    "JMSRedelivered": lambda m: False,  # a message alone is on its first delivery (see COUNTED)
    "JMSDestination": _always_null,  # reserved JMS names Hermod does not map (as Artemis)
    "JMSReplyTo": _always_null,
    "JMSXGroupID": lambda m: _text(m.group_id),
    "JMSXGroupSeq": lambda m: _int_or_zero(m.group_sequence),
    "JMSXUserID": _user_id,
    "JMSXDeliveryCount": lambda m: 1,
    # Artemis names.
    "AMQUserID": lambda m: _message_id(m.message_id),
    "AMQPriority": _priority,
    "AMQTimestamp": lambda m: _int_or_zero(m.creation_time),
    "AMQDurable": lambda m: "DURABLE" if m.durable else "NON_DURABLE",
    "AMQExpiration": lambda m: _int_or_zero(m.expiration),
    "AMQSize": lambda m: int(m.size),
    "AMQAddress": lambda m: _text(m.address),
    "AMQGroupID": lambda m: _text(m.group_id),
    "__AMQ_CID": lambda m: _text(m.container_id),  # the producer's container id (no-local)
}


# The identifiers a queued message's ref answers: how many times it was delivered before. Only
# a consumer selector naming one of them reads the ref (`CountingSelector`); filters applied
# while routing see a first delivery.
COUNTED: dict[str, Callable[[int], object]] = {
    "JMSRedelivered": lambda n: n > 0,
    "JMSXDeliveryCount": lambda n: n + 1,  # counts this delivery (Classic, JMS)
}


def annotation_key(name: str) -> str | None:
    """The message annotation an identifier names, or None: `m.<key>` and `_AMQ_<NAME>`."""
    if name.startswith("m."):
        return name[2:]
    if name.startswith("_AMQ_"):
        return "x-opt-" + name[5:].replace("_", "-")
    return None


def message_lookup(msg) -> Lookup:
    """The selector lookup for one message; cheap to make, lazy in what it reads."""

    def lookup(name: str, headers=HEADERS, missing=_MISSING):
        header = headers.get(name)
        if header is not None:
            return header(msg)
        value = (msg.application_properties or _EMPTY).get(name, missing)
        if value is not missing:
            return value
        key = annotation_key(name)
        if key is not None:
            return (msg.annotations or _EMPTY).get(key)
        return None

    return lookup


def counted_lookup(msg, delivery_count: int) -> Lookup:
    """The selector lookup for a message `delivery_count` deliveries in: JMSRedelivered and
    JMSXDeliveryCount from the count, every other identifier as `message_lookup`."""
    plain = message_lookup(msg)

    def lookup(name: str, counted=COUNTED):
        header = counted.get(name)
        return header(delivery_count) if header is not None else plain(name)

    return lookup


class CountingSelector:
    """A consumer selector that names JMSRedelivered or JMSXDeliveryCount: the queue calls it
    with the ref's delivery count. Other selectors stay plain predicates over a message, so they
    pay nothing for it; called with a message alone (as a queue filter) it sees a first delivery."""

    __slots__ = ("matches",)

    def __init__(self, matches: Callable[[Lookup], bool]):
        self.matches = matches

    def __call__(self, message, delivery_count: int = 0) -> bool:
        return self.matches(counted_lookup(message, delivery_count))
