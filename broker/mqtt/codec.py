"""Packet bodies to packets and back, for MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5).

`decode(first_byte, body, version)` takes the fixed header's first byte and the body (the
remaining length's bytes); `encode(packet, version)` returns the whole packet. Decoding checks
what the specifications make the receiver check: reserved flag bits, QoS 3, packet identifier 0,
lengths that contradict the remaining length, trailing bytes, UTF-8, properties (properties.py),
the reason codes each 5.0 packet may carry. A CONNECT's protocol level decides the version of
everything after it; `refusal_for_level` answers one the broker does not speak.
"""
from __future__ import annotations

from .errors import (TOPIC_NAME_INVALID, UNSUPPORTED_PROTOCOL_VERSION, V3_UNACCEPTABLE_PROTOCOL_VERSION,
                     MqttError, malformed, protocol_error)
from .packets import (MQTT_3_1, MQTT_3_1_1, MQTT_5, VERSIONS, Auth, ConnAck, Connect, Disconnect, Packet,
                      PingReq, PingResp, PubAck, PubComp, Publish, PubRec, PubRel, SubAck, Subscribe,
                      Subscription, UnsubAck, Unsubscribe, Will)
from .properties import (AUTH, CONNACK, CONNECT, DISCONNECT, EMPTY, PUBLISH, SUBACK, SUBSCRIBE, UNSUBACK,
                         UNSUBSCRIBE, WILL, Properties, check_allowed, encode_properties, read_properties)
from .wire import binary, read_binary, read_string, read_u16, read_u8, string, u16, varint

_NAMES = {MQTT_3_1: "MQIsdp", MQTT_3_1_1: "MQTT", MQTT_5: "MQTT"}

# The reason codes a 5.0 packet may carry (the tables of section 3); any other is a protocol error.
_ACK_REASONS = {
    4: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),  # PUBACK
    5: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),  # PUBREC
    6: frozenset((0x00, 0x92)),  # PUBREL
    7: frozenset((0x00, 0x92)),  # PUBCOMP
}
_CONNACK_REASONS = frozenset((0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C,
                              0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F))
_SUBACK_REASONS = frozenset((0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2))
_V3_SUBACK_RETURNS = frozenset((0x00, 0x01, 0x02, 0x80))
_UNSUBACK_REASONS = frozenset((0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91))
_DISCONNECT_REASONS = frozenset((0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90,
                                 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F,
                                 0xA0, 0xA1, 0xA2))
_AUTH_REASONS = frozenset((0x00, 0x18, 0x19))
_PACKET_CLASSES = {cls.TYPE: cls for cls in (PubAck, PubRec, PubRel, PubComp)}


class UnsupportedProtocol(MqttError):
    """A CONNECT whose protocol name and level the broker does not speak. `connack` holds the
    bytes to answer before closing (refusal_for_level)."""

    def __init__(self, name: str, level: int) -> None:
        super().__init__(UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol {name!r} level {level}")
        self.connack = refusal_for_level(level)
        self.level = level


def refusal_for_level(level: int) -> bytes:
    """The CONNACK for a protocol level the broker does not speak. A client at level 5 or above
    reads 5.0 CONNACKs: reason 0x84 (Unsupported Protocol Version) with no properties; any other
    client gets the 3.1.1 form with return code 0x01 (unacceptable protocol version), which 3.1
    clients read too."""
    if level >= MQTT_5:
        return bytes((0x20, 0x03, 0x00, UNSUPPORTED_PROTOCOL_VERSION, 0x00))
    return bytes((0x20, 0x02, 0x00, V3_UNACCEPTABLE_PROTOCOL_VERSION))


def _done(body: bytes, pos: int) -> None:
    if pos != len(body):
        raise malformed("bytes left over at the end of the packet")


def _reason(code: int, allowed: frozenset[int], what: str) -> int:
    if code not in allowed:
        raise protocol_error(f"reason code 0x{code:02X} is not valid in {what}")
    return code


# Decoding.

def decode(first: int, body: bytes, version: int) -> Packet:
    """The packet whose fixed header starts with `first` and whose remaining bytes are `body`,
    on a connection at protocol level `version` (ignored for CONNECT, which carries its own)."""
    kind = first >> 4
    flags = first & 0x0F
    if kind == 3:
        return _decode_publish(flags, body, version)
    if flags != (0x02 if kind in (6, 8, 10) else 0):
        raise malformed(f"reserved flag bits 0x{flags:X} set on packet type {kind}")
    if kind in _PACKET_CLASSES:
        return _decode_ack(kind, body, version)
    if kind == 1:
        return _decode_connect(body)
    if kind == 2:
        return _decode_connack(body, version)
    if kind == 8:
        return _decode_subscribe(body, version)
    if kind == 9:
        return _decode_suback(body, version)
    if kind == 10:
        return _decode_unsubscribe(body, version)
    if kind == 11:
        return _decode_unsuback(body, version)
    if kind in (12, 13):
        if body:
            raise malformed("PINGREQ/PINGRESP with a body")
        return PingReq() if kind == 12 else PingResp()
    if kind == 14:
        return _decode_disconnect(body, version)
    if kind == 15 and version == MQTT_5:
        return _decode_auth(body)
    raise malformed(f"reserved packet type {kind}")


def _decode_connect(body: bytes) -> Connect:
    name, pos = read_string(body, 0)
    level, pos = read_u8(body, pos)
    if _NAMES.get(level) != name:
        raise UnsupportedProtocol(name, level)
    flags, pos = read_u8(body, pos)
    if flags & 0x01:
        raise malformed("CONNECT reserved flag set")
    will_flag = bool(flags & 0x04)
    will_qos = (flags >> 3) & 0x03
    will_retain = bool(flags & 0x20)
    has_password = bool(flags & 0x40)
    has_username = bool(flags & 0x80)
    if will_qos == 3:
        raise malformed("will QoS 3")
    if not will_flag and (will_qos or will_retain):
        raise malformed("will QoS or retain without a will")
    if has_password and not has_username and level != MQTT_5:
        raise malformed("password without a user name")
    keep_alive, pos = read_u16(body, pos)
    props = EMPTY
    if level == MQTT_5:
        props, pos = read_properties(body, pos, CONNECT)
    client_id, pos = read_string(body, pos)
    will = None
    if will_flag:
        will_props = EMPTY
        if level == MQTT_5:
            will_props, pos = read_properties(body, pos, WILL)
        will_topic, pos = read_string(body, pos)
        will_payload, pos = read_binary(body, pos)
        will = Will(will_topic, will_payload, will_qos, will_retain, will_props)
    username = password = None
    if has_username:
        username, pos = read_string(body, pos)
    if has_password:
        password, pos = read_binary(body, pos)
    _done(body, pos)
    return Connect(client_id, level, bool(flags & 0x02), keep_alive, username, password, will, props)


def _decode_connack(body: bytes, version: int) -> ConnAck:
    if len(body) < 2:
        raise malformed("CONNACK shorter than 2 bytes")
    ack_flags, code = body[0], body[1]
    if ack_flags & 0xFE:
        raise malformed("CONNACK reserved flag bits set")
    props, pos = EMPTY, 2
    if version == MQTT_5:
        _reason(code, _CONNACK_REASONS, "CONNACK")
        props, pos = read_properties(body, pos, CONNACK)
    _done(body, pos)
    return ConnAck(bool(ack_flags & 1), code, props)


def _decode_publish(flags: int, body: bytes, version: int) -> Publish:
    qos = (flags >> 1) & 0x03
    if qos == 3:
        raise malformed("PUBLISH with QoS 3")
    dup = bool(flags & 0x08)
    if dup and not qos:
        raise malformed("PUBLISH with DUP set at QoS 0")
    # The topic inline: this is the hot path.
    if len(body) < 2:
        raise malformed("PUBLISH without a topic")
    pos = 2 + ((body[0] << 8) | body[1])
    if pos > len(body):
        raise malformed("packet ends inside the topic name")
    raw = body[2:pos]
    try:
        topic = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("topic name is not well-formed UTF-8") from None
    if "\x00" in topic:
        raise malformed("topic name contains U+0000")
    if "+" in topic or "#" in topic:
        raise MqttError(TOPIC_NAME_INVALID, "wildcard in a topic name")
    packet_id = None
    if qos:
        packet_id, pos = read_u16(body, pos)
        if not packet_id:
            raise malformed("packet identifier 0")
    props = EMPTY
    if version == MQTT_5:
        if pos < len(body) and body[pos] == 0:
            pos += 1
        else:
            props, pos = read_properties(body, pos, PUBLISH)
        if not topic and props.topic_alias is None:
            raise protocol_error("empty topic name without a topic alias")
    elif not topic:
        raise malformed("empty topic name")
    return Publish(topic, body[pos:], qos, bool(flags & 0x01), dup, packet_id, props)


def _decode_ack(kind: int, body: bytes, version: int) -> PubAck | PubRec | PubRel | PubComp:
    packet_id, pos = read_u16(body, 0)
    if not packet_id:
        raise malformed("packet identifier 0")
    code, props = 0, EMPTY
    if version == MQTT_5 and pos < len(body):
        code = _reason(body[pos], _ACK_REASONS[kind], "this acknowledgement")
        pos += 1
        if pos < len(body):
            props, pos = read_properties(body, pos, kind)
    _done(body, pos)
    return _PACKET_CLASSES[kind](packet_id, code, props)


def _options(byte: int, version: int) -> Subscription:
    qos = byte & 0x03
    if qos == 3:
        raise malformed("subscription QoS 3")
    if version != MQTT_5:
        if byte & 0xFC:
            raise malformed("subscription option reserved bits set")
        return Subscription("", qos)
    if byte & 0xC0:
        raise malformed("subscription option reserved bits set")
    retain_handling = (byte >> 4) & 0x03
    if retain_handling == 3:
        raise protocol_error("retain handling 3")
    return Subscription("", qos, bool(byte & 0x04), bool(byte & 0x08), retain_handling)


def _decode_subscribe(body: bytes, version: int) -> Subscribe:
    packet_id, pos = read_u16(body, 0)
    if not packet_id:
        raise malformed("packet identifier 0")
    props = EMPTY
    if version == MQTT_5:
        props, pos = read_properties(body, pos, SUBSCRIBE)
    subscriptions = []
    end = len(body)
    while pos < end:
        topic_filter, pos = read_string(body, pos)
        option, pos = read_u8(body, pos)
        sub = _options(option, version)
        sub.filter = topic_filter
        if sub.no_local and topic_filter.startswith("$share/"):
            raise protocol_error("no local on a shared subscription")
        subscriptions.append(sub)
    if not subscriptions:
        raise protocol_error("SUBSCRIBE without a topic filter")
    return Subscribe(packet_id, subscriptions, props)


def _decode_suback(body: bytes, version: int) -> SubAck:
    packet_id, pos = read_u16(body, 0)
    if not packet_id:
        raise malformed("packet identifier 0")
    props = EMPTY
    allowed = _V3_SUBACK_RETURNS
    if version == MQTT_5:
        props, pos = read_properties(body, pos, SUBACK)
        allowed = _SUBACK_REASONS
    codes = [_reason(c, allowed, "SUBACK") for c in body[pos:]]
    return SubAck(packet_id, codes, props)


def _decode_unsubscribe(body: bytes, version: int) -> Unsubscribe:
    packet_id, pos = read_u16(body, 0)
    if not packet_id:
        raise malformed("packet identifier 0")
    props = EMPTY
    if version == MQTT_5:
        props, pos = read_properties(body, pos, UNSUBSCRIBE)
    filters = []
    end = len(body)
    while pos < end:
        topic_filter, pos = read_string(body, pos)
        filters.append(topic_filter)
    if not filters:
        raise protocol_error("UNSUBSCRIBE without a topic filter")
    return Unsubscribe(packet_id, filters, props)


def _decode_unsuback(body: bytes, version: int) -> UnsubAck:
    packet_id, pos = read_u16(body, 0)
    if not packet_id:
        raise malformed("packet identifier 0")
    if version != MQTT_5:
        _done(body, pos)
        return UnsubAck(packet_id)
    props, pos = read_properties(body, pos, UNSUBACK)
    return UnsubAck(packet_id, [_reason(c, _UNSUBACK_REASONS, "UNSUBACK") for c in body[pos:]], props)


def _decode_disconnect(body: bytes, version: int) -> Disconnect:
    if version != MQTT_5:
        _done(body, 0)
        return Disconnect()
    if not body:
        return Disconnect()
    code = _reason(body[0], _DISCONNECT_REASONS, "DISCONNECT")
    props, pos = EMPTY, 1
    if len(body) > 1:
        props, pos = read_properties(body, pos, DISCONNECT)
    _done(body, pos)
    return Disconnect(code, props)


def _decode_auth(body: bytes) -> Auth:
    if not body:
        return Auth()
    code = _reason(body[0], _AUTH_REASONS, "AUTH")
    props, pos = EMPTY, 1
    if len(body) > 1:
        props, pos = read_properties(body, pos, AUTH)
    _done(body, pos)
    return Auth(code, props)


# Encoding.

def _frame(first: int, body: bytes) -> bytes:
    return bytes((first,)) + varint(len(body)) + body


def _props(props: Properties, packet: int, version: int) -> bytes:
    if version != MQTT_5:
        if props:
            raise malformed("properties need MQTT 5")
        return b""
    check_allowed(props, packet)
    return encode_properties(props)


def _qos(qos: int) -> int:
    if qos not in (0, 1, 2):
        raise malformed(f"QoS {qos}")
    return qos


def encode(packet: Packet, version: int) -> bytes:
    """The bytes of `packet` on a connection at `version` (a CONNECT uses its own level)."""
    if isinstance(packet, Publish):
        return encode_publish(packet, version)
    if isinstance(packet, (PubAck, PubRec, PubRel, PubComp)):
        first = 0x62 if isinstance(packet, PubRel) else packet.TYPE << 4
        body = u16(packet.packet_id)
        if version == MQTT_5 and (packet.reason_code or packet.properties):
            body += bytes((packet.reason_code,))
            if packet.properties:
                body += _props(packet.properties, packet.TYPE, version)
        return _frame(first, body)
    if isinstance(packet, Connect):
        return _encode_connect(packet)
    if isinstance(packet, ConnAck):
        body = bytes((1 if packet.session_present else 0, packet.reason_code))
        return _frame(0x20, body + _props(packet.properties, CONNACK, version))
    if isinstance(packet, Subscribe):
        out = bytearray(u16(packet.packet_id))
        out += _props(packet.properties, SUBSCRIBE, version)
        for sub in packet.subscriptions:
            out += string(sub.filter)
            option = _qos(sub.qos)
            if version == MQTT_5:
                if sub.retain_handling not in (0, 1, 2):
                    raise malformed(f"retain handling {sub.retain_handling}")
                option |= (sub.no_local << 2) | (sub.retain_as_published << 3) | (sub.retain_handling << 4)
            out.append(option)
        return _frame(0x82, bytes(out))
    if isinstance(packet, SubAck):
        return _frame(0x90, u16(packet.packet_id) + _props(packet.properties, SUBACK, version)
                      + bytes(packet.reason_codes))
    if isinstance(packet, Unsubscribe):
        out = bytearray(u16(packet.packet_id))
        out += _props(packet.properties, UNSUBSCRIBE, version)
        for f in packet.filters:
            out += string(f)
        return _frame(0xA2, bytes(out))
    if isinstance(packet, UnsubAck):
        body = u16(packet.packet_id)
        if version == MQTT_5:
            body += _props(packet.properties, UNSUBACK, version) + bytes(packet.reason_codes)
        return _frame(0xB0, body)
    if isinstance(packet, PingReq):
        return b"\xc0\x00"
    if isinstance(packet, PingResp):
        return b"\xd0\x00"
    if isinstance(packet, (Disconnect, Auth)):
        kind = DISCONNECT if isinstance(packet, Disconnect) else AUTH
        if kind == AUTH and version != MQTT_5:
            raise malformed("AUTH needs MQTT 5")
        body = b""
        if version == MQTT_5 and (packet.reason_code or packet.properties):
            body = bytes((packet.reason_code,))
            if packet.properties:
                body += _props(packet.properties, kind, version)
        return _frame(kind << 4, body)
    raise malformed(f"not an MQTT packet: {packet!r}")


def encode_publish(p: Publish, version: int) -> bytes:
    qos = _qos(p.qos)
    first = 0x30 | (qos << 1) | (0x08 if p.dup else 0) | (0x01 if p.retain else 0)
    head = string(p.topic)
    if qos:
        if not p.packet_id:
            raise malformed("QoS 1 and 2 need a packet identifier")
        head += u16(p.packet_id)
    if version == MQTT_5:
        head += b"\x00" if p.properties is EMPTY else _props(p.properties, PUBLISH, version)
    elif p.properties:
        raise malformed("properties need MQTT 5")
    n = len(head) + len(p.payload)
    return b"".join((bytes((first,)), varint(n), head, p.payload))


def _encode_connect(c: Connect) -> bytes:
    level = c.protocol_level
    if level not in VERSIONS:
        raise malformed(f"protocol level {level}")
    flags = 0x02 if c.clean_start else 0
    will = c.will
    if will is not None:
        flags |= 0x04 | (_qos(will.qos) << 3) | (0x20 if will.retain else 0)
    if c.password is not None:
        flags |= 0x40
    if c.username is not None:
        flags |= 0x80
    out = bytearray(string(_NAMES[level]))
    out.append(level)
    out.append(flags)
    out += u16(c.keep_alive)
    out += _props(c.properties, CONNECT, level)
    out += string(c.client_id)
    if will is not None:
        out += _props(will.properties, WILL, level)
        out += string(will.topic)
        out += binary(will.payload)
    if c.username is not None:
        out += string(c.username)
    if c.password is not None:
        out += binary(c.password)
    return _frame(0x10, bytes(out))
