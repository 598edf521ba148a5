"""MQTT 5 properties end to end: user properties (order and repeats kept MQTT to MQTT), content
type, response topic, correlation data, payload format, message expiry (counted down; expired
messages never delivered), subscription identifiers, no local, topic aliases both ways, the
client's maximum packet size, the client's receive maximum (never more unacknowledged QoS 1
deliveries) and the broker's (a client exceeding it is disconnected with 0x93)."""
from __future__ import annotations

import time

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from hermod.broker.mqtt import ConnAck, Disconnect, PubAck, Publish, SubAck, Subscribe, Subscription, encode
from hermod.broker.mqtt.properties import Properties
from hermod_testing import wait_for
from mqtt_clients import V5, Client, Raw, props


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


def test_properties_travel_mqtt_to_mqtt(broker):
    sub = Client(broker, V5)
    sub.subscribe("p5/t", qos=1)
    pub = Client(broker, V5)
    users = [("b", "1"), ("a", "2"), ("b", "3")]
    pub.publish("p5/t", b"\x00\xffbinary", qos=1, properties=props(
        UserProperty=users, ContentType="application/octet-stream", ResponseTopic="p5/replies/d1",
        CorrelationData=b"\x01\x02", MessageExpiryInterval=300))
    (m,) = sub.wait_messages(1)
    assert m.payload == b"\x00\xffbinary"
    p = m.properties
    assert p.UserProperty == users
    assert p.ContentType == "application/octet-stream"
    assert p.ResponseTopic == "p5/replies/d1"
    assert p.CorrelationData == b"\x01\x02"
    assert 298 <= p.MessageExpiryInterval <= 300
    pub.close()
    sub.close()


def test_expired_message_is_not_delivered(broker):
    raw = Raw(broker, "exp-sub", version=5, clean=False, properties=Properties(session_expiry_interval=60))
    raw.send(Subscribe(1, [Subscription("p5/exp", 1)]))
    raw.recv_type(SubAck)
    raw.send(Disconnect())
    raw.close()
    pub = Client(broker, V5)
    pub.publish("p5/exp", b"short", qos=1, properties=props(MessageExpiryInterval=1))
    pub.publish("p5/exp", b"long", qos=1, properties=props(MessageExpiryInterval=100))
    pub.close()
    time.sleep(1.2)  # the expiry itself is what is tested: let one second pass
    back = Client(broker, V5, client_id="exp-sub", clean=False, properties=None)
    (m,) = back.wait_messages(1)
    assert m.payload == b"long"
    back.close()


def test_subscription_identifier_and_no_local(broker):
    c = Client(broker, V5)
    sp = PahoProperties(PacketTypes.SUBSCRIBE)
    sp.SubscriptionIdentifier = 42
    c.subscribe("p5/sid", qos=1, properties=sp)
    c.subscribe("p5/nl", qos=1, noLocal=True)
    c.publish("p5/nl", b"mine", qos=1)
    other = Client(broker, V5)
    other.publish("p5/sid", b"sid", qos=1)
    other.publish("p5/nl", b"theirs", qos=1)
    wait_for(lambda: len(c.messages) == 2)
    by_payload = {m.payload: m for m in c.messages}
    assert set(by_payload) == {b"sid", b"theirs"}
    assert by_payload[b"sid"].properties.SubscriptionIdentifier == [42]
    c.close()
    other.close()


def test_topic_aliases_both_ways(broker):
    raw = Raw(broker, "alias1", version=5, properties=Properties(topic_alias_maximum=5))
    assert raw.connack.properties.topic_alias_maximum >= 1
    raw.send(Subscribe(1, [Subscription("p5/alias/#", 1)]))
    raw.recv_type(SubAck)
    raw.send(Publish("p5/alias/x", b"one", 1, packet_id=1, properties=Properties(topic_alias=3)))
    raw.send(Publish("", b"two", 1, packet_id=2, properties=Properties(topic_alias=3)))
    got = []
    while len(got) < 2:
        p = raw.recv()
        if isinstance(p, Publish):
            got.append(p)
            raw.send(PubAck(p.packet_id))
    assert got[0].topic == "p5/alias/x" and got[0].properties.topic_alias == 1
    assert got[1].topic == "" and got[1].properties.topic_alias == 1 and got[1].payload == b"two"
    raw.send(Publish("", b"bad", 0, properties=Properties(topic_alias=4)))  # never set: protocol error
    d = raw.recv_type(Disconnect)
    assert d.reason_code == 0x82
    raw.close()


def test_client_maximum_packet_size_drops_what_is_over(broker):
    raw = Raw(broker, "small1", version=5, properties=Properties(maximum_packet_size=100))
    raw.send(Subscribe(1, [Subscription("p5/size", 0)]))
    raw.recv_type(SubAck)
    pub = Client(broker, V5)
    pub.publish("p5/size", b"x" * 500, qos=1)
    pub.publish("p5/size", b"small", qos=1)
    p = raw.recv_type(Publish)
    assert p.payload == b"small"
    pub.close()
    raw.close()


def test_client_receive_maximum_bounds_unacknowledged_deliveries(broker):
    raw = Raw(broker, "rm1", version=5, properties=Properties(receive_maximum=2))
    raw.send(Subscribe(1, [Subscription("p5/rm/a", 1), Subscription("p5/rm/b", 1)]))
    raw.recv_type(SubAck)
    pub = Client(broker, V5)
    for i in range(5):
        pub.publish("p5/rm/a", f"a{i}".encode(), qos=1)
        pub.publish("p5/rm/b", f"b{i}".encode(), qos=1)
    first = [raw.recv_type(Publish), raw.recv_type(Publish)]
    raw.sock.settimeout(0.5)
    try:
        extra = raw.recv()
    except OSError:
        extra = None
    assert extra is None, f"a third unacknowledged delivery: {extra}"
    raw.sock.settimeout(10)
    seen = [p.payload for p in first]
    for p in first:
        raw.send(PubAck(p.packet_id))
    while len(seen) < 10:
        p = raw.recv_type(Publish)
        seen.append(p.payload)
        raw.send(PubAck(p.packet_id))
    assert sorted(seen) == sorted([f"a{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(5)])
    pub.close()
    raw.close()


def test_client_over_the_broker_receive_maximum_is_disconnected(broker):
    raw = Raw(broker, "flood1", version=5)
    limit = raw.connack.properties.receive_maximum
    assert isinstance(raw.connack, ConnAck) and limit
    # QoS 2 PUBLISHes never released: each stays unacknowledged until its PUBREL.
    raw.send_bytes(b"".join(encode(Publish("p5/flood", b"x", 2, packet_id=i + 1), 5) for i in range(limit + 1)))
    while True:
        p = raw.recv()
        assert p is not None, "closed without DISCONNECT 0x93"
        if isinstance(p, Disconnect):
            assert p.reason_code == 0x93
            break
    raw.close()
