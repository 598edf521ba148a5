"""Protocol detection from a connection's first bytes (issue 30, item 1): each protocol's real
opening, fed whole and a byte at a time; what is not enabled; HTTP and TLS on the wrong port;
random bytes never crash and never take more than MAX_LOOK bytes to decide."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from hermod.broker.frontdoor.detect import (AMQP, HTTP, MAX_LOOK, MORE, MQTT, OPENWIRE, PROTOCOLS, STOMP, TLS,
                                            UNKNOWN, detect)

OPENWIRE_INFO = struct.pack(">I", 250) + b"\x01ActiveMQ" + struct.pack(">I", 12) + b"\x00" * 20
MQTT_311 = bytes([0x10, 0x10, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x04]) + b"dev1"
MQTT_5 = bytes([0x10, 0x11, 0x00, 0x04]) + b"MQTT" + bytes([0x05, 0x02, 0x00, 0x3C, 0x00, 0x00, 0x04]) + b"dev1"
MQTT_31 = bytes([0x10, 0x12, 0x00, 0x06]) + b"MQIsdp" + bytes([0x03, 0x02, 0x00, 0x3C, 0x00, 0x04]) + b"dev1"
MQTT_LONG = bytes([0x10, 0x80, 0x80, 0x01, 0x00, 0x04]) + b"MQTT" + bytes([0x04])  # 3-byte remaining length

OPENINGS = [
    (b"AMQP\x00\x01\x00\x00", AMQP),
    (b"AMQP\x03\x01\x00\x00", AMQP),
    (OPENWIRE_INFO, OPENWIRE),
    (b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00", STOMP),
    (b"STOMP\r\naccept-version:1.2\r\n\r\n\x00", STOMP),
    (b"\n\r\n\nCONNECT\nlogin:a\n\n\x00", STOMP),
    (MQTT_311, MQTT),
    (MQTT_5, MQTT),
    (MQTT_31, MQTT),
    (MQTT_LONG, MQTT),
]


@pytest.mark.parametrize("data, protocol", OPENINGS)
def test_each_opening_is_recognised_whole_and_byte_by_byte(data, protocol):
    assert detect(data) == protocol
    verdicts = [detect(data[:n]) for n in range(1, len(data) + 1)]
    first = next(i for i, v in enumerate(verdicts) if v is not MORE)
    assert verdicts[first] == protocol  # never a wrong verdict on a prefix
    assert first < MAX_LOOK


@pytest.mark.parametrize("data, protocol", OPENINGS)
def test_a_protocol_not_enabled_is_unknown(data, protocol):
    others = tuple(p for p in PROTOCOLS if p != protocol)
    assert detect(data, others) == UNKNOWN


def test_one_protocol_alone():
    assert detect(b"AMQP\x03\x01\x00\x00", (AMQP,)) == AMQP
    assert detect(b"CONNECT\n", (AMQP,)) == UNKNOWN


@pytest.mark.parametrize("data, verdict", [
    (b"GET /api/queues HTTP/1.1\r\nHost: x\r\n\r\n", HTTP),
    (b"POST /api HTTP/1.1\r\n", HTTP),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", TLS),
    (b"\x00\x00\x00\x00\x00", UNKNOWN),
    (b"HELLO WORLD\n", UNKNOWN),
    (b"CONNECTX\n", UNKNOWN),
    (b"AMQX", UNKNOWN),
    (bytes([0x10, 0x10, 0x00, 0x04]) + b"MQTX", UNKNOWN),
    (bytes([0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]), UNKNOWN),  # a remaining length of 5 bytes
    (struct.pack(">I", 250) + b"\x02ActiveMQ", UNKNOWN),     # not a WireFormatInfo
])
def test_other_openings(data, verdict):
    assert detect(data) == verdict


def test_end_of_lines_alone_are_bounded():
    assert detect(b"\n" * 10) is MORE
    assert detect(b"\n" * MAX_LOOK) == UNKNOWN


@given(st.binary(max_size=200))
def test_any_bytes_get_a_verdict_within_max_look(data):
    verdict = detect(data)
    assert verdict in (AMQP, OPENWIRE, STOMP, MQTT, HTTP, TLS, UNKNOWN, MORE)
    if len(data) >= MAX_LOOK:
        assert verdict is not MORE
    # A verdict on a prefix is never taken back by more bytes.
    for n in (1, 4, 8, 13, 20):
        early = detect(data[:n])
        if early is not MORE and len(data) >= n:
            assert detect(data) == early
