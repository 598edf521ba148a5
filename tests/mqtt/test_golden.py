"""Golden packets from real implementations: paho-mqtt (the client) talking to Debian's
Mosquitto 2.0 (the server) through a recording proxy, in MQTT 3.1, 3.1.1 and 5.0. Every packet
either side sent must decode with our reader, carry what the client asked for, and re-encode to
the very same bytes."""
from __future__ import annotations

import threading

import pytest
from mosquitto_capture import Mosquitto, RecordingProxy, split_packets

from hermod.broker.mqtt import (MQTT_3_1, MQTT_3_1_1, MQTT_5, ConnAck, Connect, Disconnect, PacketReader, PingReq,
                                PingResp, PubAck, PubComp, Publish, PubRec, PubRel, SubAck, Subscribe, UnsubAck,
                                Unsubscribe, decode, encode)
from hermod_testing import wait_for

mqtt = pytest.importorskip("paho.mqtt.client")
from paho.mqtt.packettypes import PacketTypes  # noqa: E402
from paho.mqtt.properties import Properties as PahoProperties  # noqa: E402
from paho.mqtt.reasoncodes import ReasonCode  # noqa: E402
from paho.mqtt.subscribeoptions import SubscribeOptions  # noqa: E402

PAHO_PROTOCOL = {MQTT_3_1: mqtt.MQTTv31, MQTT_3_1_1: mqtt.MQTTv311, MQTT_5: mqtt.MQTTv5}


@pytest.fixture(scope="module")
def mosquitto():
    broker = Mosquitto()
    yield broker
    broker.stop()


def _props(kind: int, **values) -> PahoProperties:
    p = PahoProperties(kind)
    for k, v in values.items():
        setattr(p, k, v)
    return p


def converse(port: int, version: int) -> None:
    """One client session exercising every packet type Mosquitto and paho exchange."""
    v5 = version == MQTT_5
    kwargs = {} if v5 else {"clean_session": True}
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"golden-{version}",
                    protocol=PAHO_PROTOCOL[version], **kwargs)
    received: list = []
    lock = threading.Lock()

    def on_message(client, userdata, message):
        with lock:
            received.append(message)

    c.on_message = on_message
    c.username_pw_set("golden-user", "pässword")
    will_props = None
    if v5:
        will_props = _props(PacketTypes.WILLMESSAGE, WillDelayInterval=0, MessageExpiryInterval=60,
                            ContentType="text/plain", ResponseTopic="golden/replies", CorrelationData=b"\x00\x01",
                            PayloadFormatIndicator=1, UserProperty=[("w", "1"), ("w", "2")])
    c.will_set("golden/will", b"gone", qos=1, retain=False, properties=will_props)
    connect_props = _props(PacketTypes.CONNECT, SessionExpiryInterval=0, ReceiveMaximum=20,
                           MaximumPacketSize=100000, TopicAliasMaximum=5, RequestProblemInformation=1,
                           UserProperty=[("site", "a"), ("site", "b")]) if v5 else None
    connected = threading.Event()
    c.on_connect = lambda *a: connected.set()
    c.connect("127.0.0.1", port, keepalive=30, properties=connect_props,
              **({"clean_start": True} if v5 else {}))
    c.loop_start()
    try:
        assert connected.wait(10)
        done = threading.Event()
        c.on_subscribe = lambda *a: done.set()
        if v5:
            c.subscribe([("golden/+/q", SubscribeOptions(qos=2, noLocal=False, retainAsPublished=True,
                                                          retainHandling=0)),
                         ("golden/#", SubscribeOptions(qos=1, retainHandling=1))],
                        properties=_props(PacketTypes.SUBSCRIBE, SubscriptionIdentifier=7,
                                          UserProperty=[("k", "v")]))
        else:
            c.subscribe([("golden/+/q", 2), ("golden/#", 1)])
        assert done.wait(10)
        publish_props = _props(PacketTypes.PUBLISH, PayloadFormatIndicator=1, MessageExpiryInterval=300,
                               ContentType="application/json", ResponseTopic="golden/replies/d1",
                               CorrelationData=b"corr-\xff", UserProperty=[("a", "1"), ("b", "2"), ("a", "3")]
                               ) if v5 else None
        for qos in (0, 1, 2):
            info = c.publish(f"golden/{qos}/q", b'{"n": %d}' % qos, qos=qos, retain=(qos == 1),
                             properties=publish_props)
            info.wait_for_publish(10)
        # No subscriber: Mosquitto 5 answers PUBACK with reason 0x10 (no matching subscribers).
        c.publish("elsewhere/x", b"nobody", qos=1).wait_for_publish(10)
        # Both filters match each message (delivered once or twice, as the broker decides).
        wait_for(lambda: len({m.payload for m in received}) >= 3, message="deliveries back")
        done.clear()
        c.on_unsubscribe = lambda *a: done.set()
        c.unsubscribe(["golden/+/q", "golden/#"])
        assert done.wait(10)
        c._send_pingreq()  # keep-alive is 30 s; exchange one PINGREQ/PINGRESP now
        if v5:
            c.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, "Disconnect with will message"),
                         properties=_props(PacketTypes.DISCONNECT, SessionExpiryInterval=0))
        else:
            c.disconnect()
    finally:
        c.loop_stop()


@pytest.fixture(scope="module")
def captured(mosquitto):
    out = {}
    for version in (MQTT_3_1, MQTT_3_1_1, MQTT_5):
        proxy = RecordingProxy(mosquitto.port)
        try:
            converse(proxy.port, version)
            wait_for(lambda: proxy.connections and b"\xd0\x00" in proxy.connections[0].to_client,
                     message="PINGRESP recorded")
        finally:
            proxy.close()
        assert len(proxy.connections) == 1
        out[version] = proxy.connections[0]
    return out


def _decoded(stream: bytes, version: int, server_side: bool) -> list:
    reader = PacketReader(1 << 20, None if server_side else version)
    packets = reader.feed(stream)
    assert reader.buffered == 0
    return packets


@pytest.mark.parametrize("version", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_every_captured_packet_decodes_and_reencodes_byte_for_byte(captured, version):
    rec = captured[version]
    for stream, server_side in ((bytes(rec.to_broker), True), (bytes(rec.to_client), False)):
        raw = split_packets(stream)
        packets = _decoded(stream, version, server_side)
        assert len(packets) == len(raw)
        for data, packet in zip(raw, packets):
            assert decode(data[0], data[len(data) - _body_len(data):], version) == packet
            assert encode(packet, version) == data, (packet, data.hex())


def _body_len(data: bytes) -> int:
    i, length, shift = 1, 0, 0
    while True:
        b = data[i]
        i += 1
        length |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return length


@pytest.mark.parametrize("version", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_captured_packets_carry_what_the_client_sent(captured, version):
    rec = captured[version]
    sent = _decoded(bytes(rec.to_broker), version, True)
    got = _decoded(bytes(rec.to_client), version, False)
    kinds = {type(p) for p in sent} | {type(p) for p in got}
    assert {Connect, ConnAck, Publish, PubAck, PubRec, PubRel, PubComp, Subscribe, SubAck, Unsubscribe,
            UnsubAck, PingReq, PingResp, Disconnect} <= kinds
    connect = sent[0]
    assert isinstance(connect, Connect)
    assert connect.protocol_level == version and connect.client_id == f"golden-{version}"
    assert connect.username == "golden-user" and connect.password == "pässword".encode()
    assert connect.will is not None and connect.will.topic == "golden/will" and connect.will.payload == b"gone"
    assert connect.will.qos == 1 and connect.keep_alive == 30 and connect.clean_start
    sub = next(p for p in sent if isinstance(p, Subscribe))
    assert [(s.filter, s.qos) for s in sub.subscriptions] == [("golden/+/q", 2), ("golden/#", 1)]
    publishes = [p for p in sent if isinstance(p, Publish)]
    assert [(p.topic, p.qos, p.retain) for p in publishes] == [
        ("golden/0/q", 0, False), ("golden/1/q", 1, True), ("golden/2/q", 2, False), ("elsewhere/x", 1, False)]
    deliveries = [p for p in got if isinstance(p, Publish)]
    assert {p.payload for p in deliveries} == {b'{"n": 0}', b'{"n": 1}', b'{"n": 2}'}
    if version != MQTT_5:
        return
    assert connect.properties.user_properties == (("site", "a"), ("site", "b"))
    assert connect.properties.receive_maximum == 20 and connect.properties.maximum_packet_size == 100000
    wp = connect.will.properties
    assert wp.user_properties == (("w", "1"), ("w", "2")) and wp.response_topic == "golden/replies"
    assert wp.correlation_data == b"\x00\x01" and wp.content_type == "text/plain" and wp.will_delay_interval == 0
    assert sub.properties.subscription_identifiers == (7,) and sub.properties.user_properties == (("k", "v"),)
    assert sub.subscriptions[0].retain_as_published and sub.subscriptions[1].retain_handling == 1
    p = publishes[1].properties
    assert p.user_properties == (("a", "1"), ("b", "2"), ("a", "3"))
    assert (p.payload_format_indicator, p.message_expiry_interval, p.content_type, p.response_topic,
            p.correlation_data) == (1, 300, "application/json", "golden/replies/d1", b"corr-\xff")
    assert all(d.properties.subscription_identifiers == (7,) for d in deliveries)
    assert any(isinstance(a, PubAck) and a.reason_code == 0x10 for a in got)
    disconnect = next(p for p in sent if isinstance(p, Disconnect))
    assert disconnect.reason_code == 0x04 and disconnect.properties.session_expiry_interval == 0
