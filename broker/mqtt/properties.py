"""MQTT 5 properties (section 2.2.2): every identifier with its data type and the packets that
may carry it.

`Properties` is immutable, so one empty instance serves every packet without properties (the
common case costs nothing). Decoding keeps the order the properties arrived in (`order`), and
encoding follows it, so a decoded packet re-encodes to the same bytes; properties set by hand go
after, by identifier. User properties keep their order and repeated names; subscription
identifiers are a tuple (a PUBLISH to a client may carry several).

Rules enforced here: an identifier the packet may not carry, or a length running past the
property block, is malformed (0x81); a property given twice is a protocol error (0x82), except
user properties (and subscription identifiers in a PUBLISH); values outside their range
(payload format 2, receive maximum 0, ...) are protocol errors; topic alias 0 is 0x94.
"""
from __future__ import annotations

from typing import NamedTuple

from .errors import TOPIC_ALIAS_INVALID, MqttError, malformed, protocol_error
from .wire import binary, read_binary, read_string, read_u16, read_u32, read_u8, read_varint, string, u16, u32, varint

# Data types.
BYTE, U16, U32, VARINT, STRING, BINARY, PAIR = range(7)

# Packet types (the fixed header's high nibble); WILL (0, reserved on the wire) names the will
# properties inside a CONNECT.
WILL, CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = range(8)
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT, AUTH = range(8, 16)

_ACKS = (PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK)
_EVERY = (WILL, CONNECT, CONNACK, PUBLISH, *_ACKS, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT, AUTH)

USER_PROPERTY = 0x26
SUBSCRIPTION_IDENTIFIER = 0x0B

# identifier: (attribute, type, packets that may carry it)
_TABLE: dict[int, tuple[str, int, tuple[int, ...]]] = {
    0x01: ("payload_format_indicator", BYTE, (PUBLISH, WILL)),
    0x02: ("message_expiry_interval", U32, (PUBLISH, WILL)),
    0x03: ("content_type", STRING, (PUBLISH, WILL)),
    0x08: ("response_topic", STRING, (PUBLISH, WILL)),
    0x09: ("correlation_data", BINARY, (PUBLISH, WILL)),
    0x0B: ("subscription_identifiers", VARINT, (PUBLISH, SUBSCRIBE)),
    0x11: ("session_expiry_interval", U32, (CONNECT, CONNACK, DISCONNECT)),
    0x12: ("assigned_client_identifier", STRING, (CONNACK,)),
    0x13: ("server_keep_alive", U16, (CONNACK,)),
    0x15: ("authentication_method", STRING, (CONNECT, CONNACK, AUTH)),
    0x16: ("authentication_data", BINARY, (CONNECT, CONNACK, AUTH)),
    0x17: ("request_problem_information", BYTE, (CONNECT,)),
    0x18: ("will_delay_interval", U32, (WILL,)),
    0x19: ("request_response_information", BYTE, (CONNECT,)),
    0x1A: ("response_information", STRING, (CONNACK,)),
    0x1C: ("server_reference", STRING, (CONNACK, DISCONNECT)),
    0x1F: ("reason_string", STRING, (CONNACK, *_ACKS, DISCONNECT, AUTH)),
    0x21: ("receive_maximum", U16, (CONNECT, CONNACK)),
    0x22: ("topic_alias_maximum", U16, (CONNECT, CONNACK)),
    0x23: ("topic_alias", U16, (PUBLISH,)),
    0x24: ("maximum_qos", BYTE, (CONNACK,)),
    0x25: ("retain_available", BYTE, (CONNACK,)),
    0x26: ("user_properties", PAIR, _EVERY),
    0x27: ("maximum_packet_size", U32, (CONNECT, CONNACK)),
    0x28: ("wildcard_subscription_available", BYTE, (CONNACK,)),
    0x29: ("subscription_identifier_available", BYTE, (CONNACK,)),
    0x2A: ("shared_subscription_available", BYTE, (CONNACK,)),
}
_ALLOWED = {pid: frozenset(packets) for pid, (_, _, packets) in _TABLE.items()}
_BOOLEAN = frozenset((0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A))  # 0 or 1 only
_NOT_ZERO = frozenset((0x0B, 0x21, 0x27))  # subscription id, receive maximum, maximum packet size
_ATTRIBUTE = {name: pid for pid, (name, _, _) in _TABLE.items()}


class Properties(NamedTuple):
    """Immutable: build with keywords (`Properties(content_type="text/plain")`), change with
    `_replace`. A named tuple because it is built cheaply (a frozen dataclass of 28 fields costs
    ten times more per packet) and is safe to share (EMPTY)."""

    payload_format_indicator: int | None = None
    message_expiry_interval: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    subscription_identifiers: tuple[int, ...] = ()
    session_expiry_interval: int | None = None
    assigned_client_identifier: str | None = None
    server_keep_alive: int | None = None
    authentication_method: str | None = None
    authentication_data: bytes | None = None
    request_problem_information: int | None = None
    will_delay_interval: int | None = None
    request_response_information: int | None = None
    response_information: str | None = None
    server_reference: str | None = None
    reason_string: str | None = None
    receive_maximum: int | None = None
    topic_alias_maximum: int | None = None
    topic_alias: int | None = None
    maximum_qos: int | None = None
    retain_available: int | None = None
    user_properties: tuple[tuple[str, str], ...] = ()
    maximum_packet_size: int | None = None
    wildcard_subscription_available: int | None = None
    subscription_identifier_available: int | None = None
    shared_subscription_available: int | None = None
    # The identifiers in the order they were decoded (one entry per occurrence); not compared.
    order: tuple[int, ...] = ()

    def present(self) -> tuple[str, ...]:
        """The names of the properties that are set."""
        return tuple(name for name, value in zip(_NAMES, self) if value is not None and value != ())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Properties):
            return NotImplemented
        return self[:-1] == other[:-1]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self[:-1])

    def __bool__(self) -> bool:
        """True when any property is set."""
        return self is not EMPTY and bool(self.present())


EMPTY = Properties()
_NAMES = Properties._fields[:-1]
assert list(_NAMES) == [name for name, _, _ in _TABLE.values()]


def read_properties(body: bytes, pos: int, packet: int) -> tuple[Properties, int]:
    """The property block at `pos` (its varint length first) of a packet of type `packet`."""
    length, pos = read_varint(body, pos)
    if length == 0:
        return EMPTY, pos
    end = pos + length
    if end > len(body):
        raise malformed("property length runs past the packet")
    block = body[:end]  # reads past the block then fail as malformed
    values: dict[str, object] = {}
    order: list[int] = []
    users: list[tuple[str, str]] = []
    subscription_ids: list[int] = []
    while pos < end:
        pid, pos = read_varint(block, pos)
        entry = _TABLE.get(pid)
        if entry is None or packet not in _ALLOWED[pid]:
            raise malformed(f"property 0x{pid:02X} is not valid in this packet")
        name, kind, _ = entry
        value: object
        if kind == BYTE:
            value, pos = read_u8(block, pos)
        elif kind == U16:
            value, pos = read_u16(block, pos)
        elif kind == U32:
            value, pos = read_u32(block, pos)
        elif kind == VARINT:
            value, pos = read_varint(block, pos)
        elif kind == STRING:
            value, pos = read_string(block, pos)
        elif kind == BINARY:
            value, pos = read_binary(block, pos)
        else:
            key, pos = read_string(block, pos)
            val, pos = read_string(block, pos)
            users.append((key, val))
            order.append(pid)
            continue
        if pid in _BOOLEAN and value not in (0, 1):
            raise protocol_error(f"property 0x{pid:02X} must be 0 or 1, not {value!r}")
        if pid in _NOT_ZERO and value == 0:
            raise protocol_error(f"property 0x{pid:02X} must not be 0")
        if pid == 0x23 and value == 0:
            raise MqttError(TOPIC_ALIAS_INVALID, "topic alias 0")
        if pid == SUBSCRIPTION_IDENTIFIER:
            if subscription_ids and packet != PUBLISH:
                raise protocol_error("subscription identifier given twice")
            subscription_ids.append(value)  # type: ignore[arg-type]
        elif name in values:
            raise protocol_error(f"property 0x{pid:02X} given twice")
        else:
            values[name] = value
        order.append(pid)
    if users:
        values["user_properties"] = tuple(users)
    if subscription_ids:
        values["subscription_identifiers"] = tuple(subscription_ids)
    return Properties(**values, order=tuple(order)), end  # type: ignore[arg-type]


def _encode_one(out: bytearray, pid: int, kind: int, value: object) -> None:
    out.append(pid)  # every identifier is below 0x80: its varint is one byte
    if kind == BYTE:
        if not 0 <= value <= 0xFF:  # type: ignore[operator]
            raise malformed(f"property 0x{pid:02X}: {value} does not fit a byte")
        out.append(value)  # type: ignore[arg-type]
    elif kind == U16:
        out += u16(value)  # type: ignore[arg-type]
    elif kind == U32:
        out += u32(value)  # type: ignore[arg-type]
    elif kind == VARINT:
        out += varint(value)  # type: ignore[arg-type]
    elif kind == STRING:
        out += string(value)  # type: ignore[arg-type]
    elif kind == BINARY:
        out += binary(value)  # type: ignore[arg-type]
    else:
        pair: tuple[str, str] = value  # type: ignore[assignment]
        out += string(pair[0])
        out += string(pair[1])


def encode_properties(props: Properties) -> bytes:
    """The property block with its length. Decoded order first, then the rest by identifier."""
    if props is EMPTY or not props.present():
        return b"\x00"
    out = bytearray()
    done: set[int] = set()
    users = iter(props.user_properties)
    subscription_ids = iter(props.subscription_identifiers)
    for pid in props.order:
        name, kind, _ = _TABLE[pid]
        if pid == USER_PROPERTY or pid == SUBSCRIPTION_IDENTIFIER:
            item = next(users if pid == USER_PROPERTY else subscription_ids, None)
            if item is not None:
                _encode_one(out, pid, kind, item)
        elif pid not in done:
            value = getattr(props, name)
            if value is not None:
                _encode_one(out, pid, kind, value)
            done.add(pid)
    for name in props.present():
        pid = _ATTRIBUTE[name]
        kind = _TABLE[pid][1]
        if pid == USER_PROPERTY:
            for pair in users:
                _encode_one(out, pid, kind, pair)
        elif pid == SUBSCRIPTION_IDENTIFIER:
            for sid in subscription_ids:
                _encode_one(out, pid, kind, sid)
        elif pid not in done:
            _encode_one(out, pid, kind, getattr(props, name))
    return varint(len(out)) + bytes(out)


def check_allowed(props: Properties, packet: int) -> None:
    """Refuse (on encoding) a property the packet may not carry."""
    for name in props.present():
        if packet not in _ALLOWED[_ATTRIBUTE[name]]:
            raise malformed(f"property {name} is not valid in this packet")
