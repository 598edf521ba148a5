"""Retained messages (stored durably, delivered on subscribe with the retain flag, an empty
payload clears, 5.0 retain handling and retain as published) and wills with the 5.0 will delay."""
from __future__ import annotations

import socket
import time

import pytest

from hermod_testing import wait_for
from mqtt_clients import V5, VERSIONS, Client, Raw, host_port

from hermod.broker.mqtt import Connect, Disconnect, Will, encode
from hermod.broker.mqtt.properties import Properties


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_retained_delivered_on_subscribe_cleared_by_empty_payload_and_kept_across_restart(
        start_broker, tmp_path, version):
    db = tmp_path / "ret.db"
    broker = start_broker(store=f"sqlite:///{db}")
    pub = Client(broker, version)
    pub.publish("ret/a", b"A1", qos=1, retain=True)
    pub.publish("ret/a", b"A2", qos=0, retain=True)  # replaces A1 (QoS 0 retained too, stored)
    pub.publish("ret/b", b"B", qos=1, retain=True)
    pub.publish("ret/c", b"C", qos=1, retain=True)
    pub.publish("ret/c", b"", qos=1, retain=True)  # clears ret/c
    pub.close()
    sub = Client(broker, version)
    sub.subscribe("ret/#", qos=1)
    got = sub.wait_messages(2)
    assert sorted((m.topic, m.payload, m.retain) for m in got) == [("ret/a", b"A2", True), ("ret/b", b"B", True)]
    sub.close()
    broker.stop()
    broker = start_broker(store=f"sqlite:///{db}")
    again = Client(broker, version)
    again.subscribe("ret/+", qos=1)
    got = again.wait_messages(2)
    assert sorted((m.topic, m.payload) for m in got) == [("ret/a", b"A2"), ("ret/b", b"B")]
    live = Client(broker, version)
    live.publish("ret/b", b"B2", qos=1, retain=True)
    wait_for(lambda: len(again.messages) == 3)
    assert (again.messages[2].payload, again.messages[2].retain) == (b"B2", False)  # live: flag 0
    assert not [m for m in again.messages if m.topic == "ret/c"]
    again.close()
    live.close()


def test_v5_retain_handling_and_retain_as_published(start_broker):
    broker = start_broker()
    pub = Client(broker, V5)
    pub.publish("rh/t", b"kept", qos=1, retain=True)
    never = Client(broker, V5)
    never.subscribe("rh/t", qos=1, retainHandling=2, retainAsPublished=True)
    if_new = Client(broker, V5)
    if_new.subscribe("rh/t", qos=1, retainHandling=1)
    assert if_new.wait_messages(1)[0].payload == b"kept"
    if_new.subscribe("rh/t", qos=1, retainHandling=1)  # exists already: nothing again
    pub.publish("rh/t", b"live", qos=1, retain=True)
    got = never.wait_messages(1)
    assert [(m.payload, m.retain) for m in got] == [(b"live", True)]  # retain as published
    wait_for(lambda: len(if_new.messages) == 2)
    assert [(m.payload, m.retain) for m in if_new.messages] == [(b"kept", True), (b"live", False)]
    for c in (pub, never, if_new):
        c.close()


def test_v5_will_delay_and_resumed_session_cancels_it(start_broker):
    broker = start_broker()
    watcher = Client(broker, V5)
    watcher.subscribe("wd/#", qos=1)
    expiry = Properties(session_expiry_interval=60)
    host, port = host_port(broker)

    def connect_with_will(cid: str) -> socket.socket:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(encode(Connect(cid, 5, False, 60, None, None,
                                 Will(f"wd/{cid}", cid.encode(), 1, False, Properties(will_delay_interval=1)),
                                 expiry), 5))
        assert s.recv(64)[:1] == b"\x20"
        return s

    started = time.monotonic()
    connect_with_will("wd2").close()  # abrupt: the will follows after its delay
    assert watcher.wait_messages(1)[0].payload == b"wd2"
    assert time.monotonic() - started >= 0.9
    connect_with_will("wd3").close()
    back = Raw(broker, "wd3", version=5, clean=False, properties=expiry)  # resumed within the delay
    assert back.connack.session_present
    marker = Client(broker, V5)
    marker.publish("wd/marker", b"m", qos=1)
    # An absence: watched past twice the will delay (a bound, not a synchronisation).
    deadline = time.monotonic() + 2
    wait_for(lambda: time.monotonic() > deadline and b"m" in watcher.payloads(), timeout=5)
    assert b"wd3" not in watcher.payloads()
    back.send(Disconnect())
    back.close()
    marker.close()
    watcher.close()
