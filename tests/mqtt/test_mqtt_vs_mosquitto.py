"""The same MQTT scenarios against Hermod and against Debian's Mosquitto 2.0: where the contract
follows MQTT itself, what a client observes must be the same (CONNACK for an unsupported
level, the `$` rule, retained messages with the retain flag, clearing and retain as published,
persistent sessions and queued messages, delivery at the lower QoS, no local, the will on a
takeover). Each scenario returns what the client saw; the test compares the two."""
from __future__ import annotations

import pytest

from hermod_testing import wait_for
from mosquitto_capture import Mosquitto
from mqtt_clients import V5, V311, Client, raw_connect


class Target:
    def __init__(self, address: str):
        self.address = address


@pytest.fixture(scope="module")
def targets(start_module_broker):
    mosquitto = Mosquitto()
    hermod = start_module_broker()
    yield {"hermod": Target(hermod.address), "mosquitto": Target(f"127.0.0.1:{mosquitto.port}")}
    mosquitto.stop()


def both(targets, scenario):
    return scenario(targets["hermod"], "h"), scenario(targets["mosquitto"], "m")


def unsupported_level(b, tag):
    def packet(level):
        body = b"\x00\x04MQTT" + bytes((level, 0x02)) + b"\x00\x3c" + (b"\x00" if level >= 5 else b"") + b"\x00\x01x"
        return bytes((0x10, len(body))) + body
    # Level 6 is left out: Mosquitto answers it in the 3.1.1 form (return code 0x01), Hermod in
    # the 5.0 form (0x84), as the contract says for a client at level 5 or above.
    return raw_connect(b, packet(3)), raw_connect(b, packet(2))


def dollar_rule(b, tag):
    wild = Client(b, V311)
    wild.subscribe("#", qos=1)
    plus = Client(b, V311)
    plus.subscribe(f"+/{tag}dl", qos=1)
    pub = Client(b, V311)
    pub.publish(f"$x/{tag}dl", b"dollar", qos=1)
    pub.publish(f"y/{tag}dl", b"plain", qos=1)
    wait_for(lambda: b"plain" in plus.payloads() and b"plain" in wild.payloads())
    seen = (sorted(p for p in wild.payloads() if p in (b"dollar", b"plain")), plus.payloads())
    for c in (wild, plus, pub):
        c.close()
    return seen


def retained(b, tag, version=V5):
    pub = Client(b, version)
    pub.publish(f"{tag}r/a", b"A", qos=1, retain=True)
    pub.publish(f"{tag}r/b", b"B", qos=1, retain=True)
    pub.publish(f"{tag}r/b", b"", qos=1, retain=True)
    sub = Client(b, version)
    sub.subscribe(f"{tag}r/#", qos=1, **({"retainAsPublished": True} if version == V5 else {}))
    sub.wait_messages(1)
    pub.publish(f"{tag}r/a", b"A2", qos=1, retain=True)
    sub.wait_messages(2)
    seen = [(m.topic.split("/", 1)[1], m.payload, m.retain, m.qos) for m in sub.messages]
    for c in (pub, sub):
        c.close()
    return seen


def persistent_session(b, tag):
    cid = f"{tag}-persist"
    sub = Client(b, V311, client_id=cid, clean=False)
    first_present = sub.connack[1]
    sub.subscribe(f"{tag}ps/t", qos=1)
    sub.close()
    pub = Client(b, V311)
    pub.publish(f"{tag}ps/t", b"q1", qos=1)
    pub.publish(f"{tag}ps/t", b"q2", qos=2)
    pub.close()
    back = Client(b, V311, client_id=cid, clean=False)
    got = back.wait_messages(2)
    seen = (first_present, back.connack[1], [(m.payload, m.qos) for m in got])
    back.close()
    clean = Client(b, V311, client_id=cid, clean=True)
    seen += (clean.connack[1],)
    clean.close()
    return seen


def lower_qos_and_no_local(b, tag):
    c = Client(b, V5)
    c.subscribe(f"{tag}nl/t", qos=1, noLocal=True)
    c.subscribe(f"{tag}q/t", qos=1)
    c.publish(f"{tag}nl/t", b"mine", qos=1)
    other = Client(b, V5)
    other.publish(f"{tag}q/t", b"two", qos=2)
    other.publish(f"{tag}nl/t", b"theirs", qos=1)
    wait_for(lambda: len(c.messages) == 2)
    seen = sorted((m.payload, m.qos) for m in c.messages)
    c.close()
    other.close()
    return seen


def will_on_takeover(b, tag):
    watcher = Client(b, V311)
    watcher.subscribe(f"{tag}w/#", qos=1)
    cid = f"{tag}-taken"
    first = Client(b, V311, client_id=cid, will=(f"{tag}w/gone", b"will", 1, False))
    second = Client(b, V311, client_id=cid)
    got = watcher.wait_messages(1)
    seen = [m.payload for m in got]
    for c in (first, second, watcher):
        c.close()
    return seen


@pytest.mark.parametrize("scenario", [unsupported_level, dollar_rule, retained, persistent_session,
                                      lower_qos_and_no_local, will_on_takeover],
                         ids=lambda s: s.__name__)
def test_same_as_mosquitto(targets, scenario):
    hermod, mosquitto = both(targets, scenario)
    assert hermod == mosquitto
