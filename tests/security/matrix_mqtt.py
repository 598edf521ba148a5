"""The MQTT entry paths of the permission matrix (paho-mqtt clients): a 5.0 PUBLISH (`send`,
`create_address`: PUBACK 0x87 on a refusal), a 3.1.1 PUBLISH (no way to refuse: acknowledged,
dropped, logged and audited), a SUBSCRIBE (`consume`: SUBACK 0x87), and a persistent session's
SUBSCRIBE (`create_durable_queue` for its subscription queue CLIENTID.ADDRESS). Topics map to
addresses `/` -> `.`: the cell's address `pm.c012.may` is the topic `pm/c012/may`."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt

from hermod_testing import wait_for
from matrix_core import USERS, Case, EntryPath, Wire, allowed, denied, multicast_address

MQTT_TESTS = Path(__file__).resolve().parent.parent / "mqtt"
if str(MQTT_TESTS) not in sys.path:
    sys.path.insert(0, str(MQTT_TESTS))

from mqtt_clients import V5, V311, Client  # noqa: E402

DENIED = "0x87"


def topic(address: str) -> str:
    return address.replace(".", "/")


def text(body) -> str:
    return body if isinstance(body, str) else bytes(body).decode()


def client(wire: Wire, case: Case, version, **kwargs) -> Client:
    return Client(wire.broker, version, username=case.user, password=USERS[case.user], **kwargs)


class Publish5(EntryPath):
    name = "mqtt5-publish"
    protocol = "mqtt"
    operations = ("send", "create_address")
    denials = (DENIED,)

    def needs(self, operation):
        return frozenset({operation, "send"})

    def toml(self, case):
        return multicast_address(case.address, f"{case.address}.sub") if case.operation == "send" else ""

    def attempt(self, wire, case):
        c = client(wire, case, V5)
        acks: dict[int, int] = {}
        c.c.on_publish = lambda cl, ud, mid, rc, props: acks.__setitem__(mid, rc.value)
        try:
            info = c.publish(topic(case.address), case.tag.encode(), qos=1, wait=False,
                             properties=_text())  # a text body: an AMQP string the admin reads
            wait_for(lambda: info.mid in acks, message="PUBACK")
        finally:
            c.close()
        code = acks[info.mid]
        if code == 0x87:
            if case.operation == "send":
                return denied(DENIED, wire.messages(f"{case.address}.sub") == 0)
            return denied(DENIED, case.address not in wire.addresses())
        if case.operation == "send":
            return allowed(f"0x{code:02x}", code == 0 and
                           [text(b) for b in wire.take(f"{case.address}::{case.address}.sub", 1)] == [case.tag])
        return allowed(f"0x{code:02x}", code == 0 and case.address in wire.addresses())


class Publish311(EntryPath):
    """3.1.1 cannot refuse a PUBLISH: the broker acknowledges it, drops it, logs and audits the
    denial (the matrix's `denied` verdict with the answer "dropped")."""
    name = "mqtt311-publish"
    protocol = "mqtt"
    operations = ("send",)
    denials = ("dropped",)

    def toml(self, case):
        return multicast_address(case.address, f"{case.address}.sub")

    def attempt(self, wire, case):
        c = client(wire, case, V311)
        try:
            c.publish(topic(case.address), case.tag.encode(), qos=1)  # waits for the PUBACK
        finally:
            c.close()
        if wire.logged("denied", case.user, "send", case.address):
            return denied("dropped", wire.messages(f"{case.address}.sub") == 0)
        # Its body is bytes (a data section), which the blocking AMQP client hands out as a view
        # of a buffer it reuses: the count says it arrived.
        return allowed("PUBACK", wire.messages(f"{case.address}.sub") == 1)


class Subscribe5(EntryPath):
    name = "mqtt5-subscribe"
    protocol = "mqtt"
    operations = ("consume",)
    denials = (DENIED,)

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        c = client(wire, case, V5)
        try:
            codes = c.subscribe(topic(case.address), qos=1)
            if codes != [1]:
                return denied(f"0x{codes[0]:02x}", not [q for q in wire.queues_on(case.address)])
            wire.send(case.address, case.tag)
            got = c.wait_messages(1)
        finally:
            c.close()
        return allowed("SUBACK 1", [m.payload.decode() for m in got] == [case.tag])


class PersistentSubscribe(EntryPath):
    """A session that persists subscribes through a durable subscription queue CLIENTID.ADDRESS."""
    name = "mqtt-persistent-subscribe"
    protocol = "mqtt"
    operations = ("create_durable_queue",)
    denials = (DENIED,)

    def needs(self, operation):
        return frozenset({operation, "consume"})

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        client_id = f"pm-{uuid.uuid4().hex[:8]}"
        c = client(wire, case, V5, client_id=client_id, clean=False,
                   properties=_session_expiry(3600))
        try:
            codes = c.subscribe(topic(case.address), qos=1)
        finally:
            c.close()
        queue = wire.queue(f"{client_id}.{case.address}")
        if codes != [1]:
            return denied(f"0x{codes[0]:02x}", queue is None)
        return allowed("SUBACK 1", queue is not None and queue.get("durable", True))


def _text():
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    p = Properties(PacketTypes.PUBLISH)
    p.PayloadFormatIndicator = 1
    return p


def _session_expiry(seconds: int):
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties
    p = Properties(PacketTypes.CONNECT)
    p.SessionExpiryInterval = seconds
    return p


PATHS: list[EntryPath] = [Publish5(), Publish311(), Subscribe5(), PersistentSubscribe()]

__all__ = ["PATHS", "mqtt"]
