"""The other direction of the golden test: packets our codec encodes, sent over a plain socket to
Debian's Mosquitto 2.0, are accepted and understood; what Mosquitto answers decodes; and a
paho-mqtt subscriber receives what we published, MQTT 5 properties included."""
from __future__ import annotations

import socket
import threading

import pytest
from mosquitto_capture import Mosquitto

from hermod.broker.mqtt import (MQTT_3_1, MQTT_3_1_1, MQTT_5, ConnAck, Connect, Disconnect, PacketReader, PingReq,
                                PingResp, Properties, PubAck, PubComp, Publish, PubRec, PubRel, SubAck, Subscribe,
                                Subscription, UnsubAck, Unsubscribe, Will, encode)
from hermod_testing import wait_for

mqtt = pytest.importorskip("paho.mqtt.client")


@pytest.fixture(scope="module")
def mosquitto():
    broker = Mosquitto()
    yield broker
    broker.stop()


class RawClient:
    """A blocking client made of our codec and a socket (the test's, not the broker's)."""

    def __init__(self, port: int, version: int) -> None:
        self.version = version
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = PacketReader(1 << 20, version)
        self.pending: list = []

    def send(self, packet) -> None:
        self.sock.sendall(encode(packet, self.version))

    def receive(self):
        while not self.pending:
            data = self.sock.recv(65536)
            assert data, "Mosquitto closed the connection"
            self.pending += self.reader.feed(data)
        return self.pending.pop(0)

    def close(self) -> None:
        self.sock.close()


def paho_subscriber(port: int, version: int, topic: str):
    protocol = {MQTT_3_1: mqtt.MQTTv31, MQTT_3_1_1: mqtt.MQTTv311, MQTT_5: mqtt.MQTTv5}[version]
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"watch-{version}", protocol=protocol)
    got: list = []
    subscribed = threading.Event()
    c.on_message = lambda client, userdata, m: got.append(m)
    c.on_connect = lambda client, *a: client.subscribe(topic, qos=2)
    c.on_subscribe = lambda *a: subscribed.set()
    c.connect("127.0.0.1", port)
    c.loop_start()
    assert subscribed.wait(10)
    return c, got


USER = (("k", "1"), ("j", "x"), ("k", "2"))


@pytest.mark.parametrize("version", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_mosquitto_accepts_what_we_encode_and_we_decode_its_answers(mosquitto, version):
    v5 = version == MQTT_5
    watcher, seen = paho_subscriber(mosquitto.port, version, "ours/#")
    c = RawClient(mosquitto.port, version)
    try:
        P = Properties if v5 else (lambda **kw: Properties())  # noqa: E731
        c.send(Connect(f"ours-{version}", version, keep_alive=30, username="u", password=b"p",
                       will=Will("ours/will", b"w", 1, False, P(will_delay_interval=0, user_properties=USER)),
                       properties=P(receive_maximum=10, topic_alias_maximum=0, user_properties=USER)))
        ack = c.receive()
        assert isinstance(ack, ConnAck) and ack.reason_code == 0
        if v5:
            assert ack.properties.topic_alias_maximum  # Mosquitto grants aliases; we use one below
        c.send(Subscribe(1, [Subscription("ours/echo/+", 2, retain_handling=2 if v5 else 0)],
                         P(subscription_identifiers=(9,))))
        sub_ack = c.receive()
        assert isinstance(sub_ack, SubAck) and sub_ack.packet_id == 1 and sub_ack.reason_codes == [2]
        props = P(payload_format_indicator=1, message_expiry_interval=120, content_type="text/plain",
                  response_topic="ours/replies", correlation_data=b"\x00c", user_properties=USER)
        c.send(Publish("ours/echo/q0", b"zero", 0, properties=props))
        c.send(Publish("ours/echo/q1", b"one", 1, packet_id=11, properties=props))
        c.send(Publish("ours/echo/q2", b"two", 2, packet_id=12, properties=props))
        if v5:  # set alias 1, then publish by the alias alone
            c.send(Publish("ours/echo/alias", b"a1", 1, packet_id=13, properties=Properties(topic_alias=1)))
            c.send(Publish("", b"a2", 1, packet_id=14, properties=Properties(topic_alias=1)))
        expected = {b"zero", b"one", b"two"} | ({b"a1", b"a2"} if v5 else set())
        delivered = {}
        acks = []
        while len(delivered) < len(expected) or len(acks) < len(expected) - 1:
            p = c.receive()
            if isinstance(p, Publish):
                delivered[p.payload] = p
                if p.qos == 1:
                    c.send(PubAck(p.packet_id))
                elif p.qos == 2:
                    c.send(PubRec(p.packet_id))
            elif isinstance(p, PubRec):
                c.send(PubRel(p.packet_id))
            elif isinstance(p, PubRel):
                c.send(PubComp(p.packet_id))
            elif isinstance(p, (PubAck, PubComp)):
                acks.append(p)
        assert set(delivered) == expected
        assert sorted(a.packet_id for a in acks) == ([11, 12, 13, 14] if v5 else [11, 12])
        if v5:
            assert delivered[b"a2"].topic == "ours/echo/alias"
            got = delivered[b"one"].properties
            assert got.user_properties == USER and got.content_type == "text/plain"
            assert got.response_topic == "ours/replies" and got.correlation_data == b"\x00c"
            assert got.subscription_identifiers == (9,) and got.payload_format_indicator == 1
        c.send(Unsubscribe(2, ["ours/echo/+"]))
        while not isinstance(p := c.receive(), UnsubAck):
            pass
        assert p.packet_id == 2 and p.reason_codes == ([0] if v5 else [])
        c.send(PingReq())
        assert isinstance(c.receive(), PingResp)
        c.send(Disconnect())
        wait_for(lambda: {m.payload for m in seen} >= expected, message="paho saw our publishes")
        assert b"w" not in {m.payload for m in seen}  # a normal DISCONNECT discards the will
        if v5:
            m = next(m for m in seen if m.payload == b"one")
            assert m.properties.UserProperty == list(USER) and m.properties.ContentType == "text/plain"
            assert m.properties.ResponseTopic == "ours/replies" and m.properties.CorrelationData == b"\x00c"
    finally:
        c.close()
        watcher.loop_stop()
        watcher.disconnect()


def test_mosquitto_refuses_an_unknown_auth_method_with_a_connack_we_decode(mosquitto):
    c = RawClient(mosquitto.port, MQTT_5)
    try:
        c.send(Connect("auth-1", MQTT_5, properties=Properties(authentication_method="NOPE-1")))
        ack = c.receive()
        assert isinstance(ack, ConnAck) and ack.reason_code == 0x8C  # bad authentication method
    finally:
        c.close()
