"""The MQTT control packets as plain values, one class per packet type, shared by 3.1, 3.1.1
and 5.0 (fields a version lacks keep their defaults: properties, reason codes on acks).
`codec.py` turns them into bytes and back."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Union

from .properties import EMPTY, Properties

MQTT_3_1 = 3  # protocol name "MQIsdp"
MQTT_3_1_1 = 4  # protocol name "MQTT"
MQTT_5 = 5
VERSIONS = (MQTT_3_1, MQTT_3_1_1, MQTT_5)


@dataclass(slots=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = EMPTY  # 5.0: will delay, expiry, content type, response topic, ...


@dataclass(slots=True)
class Connect:
    TYPE: ClassVar[int] = 1
    client_id: str
    protocol_level: int = MQTT_3_1_1
    clean_start: bool = True  # 3.x: clean session
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: Properties = EMPTY


@dataclass(slots=True)
class ConnAck:
    TYPE: ClassVar[int] = 2
    session_present: bool = False
    reason_code: int = 0  # 3.x: the return code 0..5; 5.0: a reason code
    properties: Properties = EMPTY


@dataclass(slots=True)
class Publish:
    TYPE: ClassVar[int] = 3
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None  # present for QoS 1 and 2
    properties: Properties = EMPTY


@dataclass(slots=True)
class PubAck:
    TYPE: ClassVar[int] = 4
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY


@dataclass(slots=True)
class PubRec:
    TYPE: ClassVar[int] = 5
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY


@dataclass(slots=True)
class PubRel:
    TYPE: ClassVar[int] = 6
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY


@dataclass(slots=True)
class PubComp:
    TYPE: ClassVar[int] = 7
    packet_id: int
    reason_code: int = 0
    properties: Properties = EMPTY


@dataclass(slots=True)
class Subscription:
    filter: str
    qos: int = 0  # 5.0: the maximum QoS
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0  # 0 send retained on subscribe, 1 only if new, 2 never


@dataclass(slots=True)
class Subscribe:
    TYPE: ClassVar[int] = 8
    packet_id: int
    subscriptions: list[Subscription] = field(default_factory=list)
    properties: Properties = EMPTY  # 5.0: one subscription identifier, user properties


@dataclass(slots=True)
class SubAck:
    TYPE: ClassVar[int] = 9
    packet_id: int
    reason_codes: list[int] = field(default_factory=list)  # 3.x: granted QoS or 0x80
    properties: Properties = EMPTY


@dataclass(slots=True)
class Unsubscribe:
    TYPE: ClassVar[int] = 10
    packet_id: int
    filters: list[str] = field(default_factory=list)
    properties: Properties = EMPTY


@dataclass(slots=True)
class UnsubAck:
    TYPE: ClassVar[int] = 11
    packet_id: int
    reason_codes: list[int] = field(default_factory=list)  # 5.0 only
    properties: Properties = EMPTY


@dataclass(slots=True)
class PingReq:
    TYPE: ClassVar[int] = 12


@dataclass(slots=True)
class PingResp:
    TYPE: ClassVar[int] = 13


@dataclass(slots=True)
class Disconnect:
    TYPE: ClassVar[int] = 14
    reason_code: int = 0  # 5.0 only
    properties: Properties = EMPTY


@dataclass(slots=True)
class Auth:
    TYPE: ClassVar[int] = 15  # 5.0 only
    reason_code: int = 0
    properties: Properties = EMPTY


Packet = Union[Connect, ConnAck, Publish, PubAck, PubRec, PubRel, PubComp, Subscribe, SubAck,
               Unsubscribe, UnsubAck, PingReq, PingResp, Disconnect, Auth]
