"""MQTT CONNECT end to end: protocol levels (an unsupported one refused with CONNACK 0x01 /
0x84), user name and password against [security] users (0x04 / 0x86 for bad ones, 0x05 / 0x87
without a user name when anonymous is off), client id takeover (the first connection closed and
its will published), keep-alive (a silent client dropped at 1.5x, its will published), the 5.0
server keep-alive and assigned client identifier, and a clean DISCONNECT (no will)."""
from __future__ import annotations

import socket
import time

import pytest

from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for
from mqtt_clients import V311, V5, VERSIONS, Client, host_port, raw_connect

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
CONFIG = "[security]\nanonymous = false\n" + "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(p, iterations=64)}"\nroles = ["r"]\n'
    for n, p in USERS.items())


@pytest.fixture(scope="module")
def secured(start_module_broker):
    return start_module_broker(config=CONFIG)


def connect_packet(level: int, name: bytes = b"MQTT") -> bytes:
    body = len(name).to_bytes(2, "big") + name + bytes((level, 0x02)) + (60).to_bytes(2, "big")
    if level == 5:
        body += b"\x00"
    body += (3).to_bytes(2, "big") + b"cid"
    return bytes((0x10, len(body))) + body


def test_unsupported_protocol_level_refused(secured):
    assert raw_connect(secured, connect_packet(6)) == bytes((0x20, 0x03, 0x00, 0x84, 0x00))
    assert raw_connect(secured, connect_packet(2)) == bytes((0x20, 0x02, 0x00, 0x01))


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_login(secured, version):
    good = Client(secured, version, username="alice", password="alice-pw")
    assert good.connack[0] == 0
    good.close()
    bad = Client(secured, version, username="alice", password="wrong")
    # paho reads a 3.1.1 return code as the 5.0 reason code of that meaning (4 -> 0x86, 5 -> 0x87).
    assert bad.connack[0] == 0x86
    bad.close()
    nobody = Client(secured, version)
    assert nobody.connack[0] == 0x87
    nobody.close()


def test_mqtt_3_1_connects(secured):
    c = Client(secured, mqtt_v31(), username="alice", password="alice-pw")
    assert c.connack[0] == 0
    c.close()


def mqtt_v31():
    import paho.mqtt.client as mqtt
    return mqtt.MQTTv31


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_takeover_closes_the_first_and_publishes_its_will(secured, version):
    watcher = Client(secured, version, username="bob", password="bob-pw")
    watcher.subscribe("wills/#", qos=1)
    first = Client(secured, version, client_id=f"dev-{version}", username="alice", password="alice-pw",
                   will=(f"wills/dev-{version}", b"gone", 1, False))
    second = Client(secured, version, client_id=f"dev-{version}", username="alice", password="alice-pw")
    assert second.connack[0] == 0
    wait_for(lambda: first.disconnected, message="the first connection closed")
    if version == V5:
        assert first.disconnected[0] == 0x8E
    assert watcher.wait_messages(1)[0].payload == b"gone"
    second.close()
    watcher.close()


def test_another_user_cannot_take_a_session_over(secured):
    mine = Client(secured, V311, client_id="owned-1", clean=False, username="alice", password="alice-pw")
    mine.subscribe("owned/t", qos=1)
    theirs = Client(secured, V311, client_id="owned-1", clean=False, username="bob", password="bob-pw")
    assert theirs.connack[0] == 0x87  # 3.1.1 return code 5, as paho reads it
    assert not mine.disconnected
    mine.close()
    theirs.close()


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_clean_disconnect_publishes_no_will(secured, version):
    watcher = Client(secured, version, username="bob", password="bob-pw")
    watcher.subscribe("cw/#", qos=1)
    c = Client(secured, version, username="alice", password="alice-pw", will=("cw/x", b"will", 1, False))
    c.close()
    marker = Client(secured, version, username="alice", password="alice-pw")
    marker.publish("cw/marker", b"m", qos=1)
    wait_for(lambda: b"m" in watcher.payloads())
    assert watcher.payloads() == [b"m"]
    marker.close()
    watcher.close()


def test_silent_client_dropped_after_one_and_a_half_keep_alive(secured):
    """A raw client with keep-alive 1 s that never pings: closed after ~1.5 s, its will sent."""
    watcher = Client(secured, V311, username="bob", password="bob-pw")
    watcher.subscribe("ka/#", qos=1)
    user, pw = b"alice", b"alice-pw"
    body = (b"\x00\x04MQTT\x04" + bytes((0xC0 | 0x04 | 0x08,)) + (1).to_bytes(2, "big")
            + (3).to_bytes(2, "big") + b"ka1" + (4).to_bytes(2, "big") + b"ka/w" + (4).to_bytes(2, "big") + b"dead"
            + len(user).to_bytes(2, "big") + user + len(pw).to_bytes(2, "big") + pw)
    host, port = host_port(secured)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(bytes((0x10, len(body))) + body)
        assert s.recv(4) == b"\x20\x02\x00\x00"
        start = time.monotonic()
        assert s.recv(10) == b""  # closed by the broker
        took = time.monotonic() - start
    assert 1.3 <= took <= 4, took
    assert watcher.wait_messages(1)[0].payload == b"dead"
    watcher.close()


def test_v5_server_keep_alive_and_assigned_client_id(secured):
    c = Client(secured, V5, client_id="", username="alice", password="alice-pw", keepalive=0)
    code, present, props = c.connack
    assert code == 0 and not present
    assert props.ServerKeepAlive == 3600
    assert props.AssignedClientIdentifier.startswith("hermod-")
    assert props.ReceiveMaximum >= 1 and props.TopicAliasMaximum >= 1
    c.close()


def test_v311_empty_client_id_needs_clean_session(secured):
    """paho refuses to send it, so the CONNECT is raw: return code 2 (identifier rejected)."""
    user, pw = b"alice", b"alice-pw"
    body = (b"\x00\x04MQTT\x04\xc0" + (60).to_bytes(2, "big") + b"\x00\x00"
            + len(user).to_bytes(2, "big") + user + len(pw).to_bytes(2, "big") + pw)
    assert raw_connect(secured, bytes((0x10, len(body))) + body) == b"\x20\x02\x00\x02"
