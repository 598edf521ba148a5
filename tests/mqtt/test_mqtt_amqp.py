"""MQTT <-> AMQP per the contract's table "Messages across protocols": payload format 1 <-> an
AMQP string body, bytes <-> data, correlation data <-> correlation-id (a string id as its UTF-8
bytes), response topic <-> reply-to with the topic mapping (`replies/d1` <-> `replies.d1`),
content type, user properties <-> application properties (strings), QoS > 0 <-> durable,
message expiry <-> ttl / absolute-expiry-time; a body MQTT cannot carry goes as its AMQP
encoding with content type application/x-amqp-value."""
from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

from hermod.broker.protocol.amqptypes import decode
from hermod.broker.tools.clients import Capabilities
from mqtt_clients import V5, V311, Client, props


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


@pytest.fixture
def amqp(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    yield conn
    conn.close()


def test_mqtt5_to_amqp(broker, amqp):
    receiver = amqp.create_receiver("xp.a.t", options=Capabilities("topic"))
    pub = Client(broker, V5)
    pub.publish("xp/a/t", "héllo".encode(), qos=1, properties=props(
        PayloadFormatIndicator=1, CorrelationData=b"corr-1", ResponseTopic="replies/d1",
        ContentType="text/plain", UserProperty=[("site", "north"), ("n", "7")], MessageExpiryInterval=60))
    m = receiver.receive(timeout=10)
    receiver.accept()
    assert m.body == "héllo"
    assert bytes(m.correlation_id) == b"corr-1"
    assert m.reply_to == "replies.d1"
    assert m.content_type == "text/plain"
    assert m.properties == {"site": "north", "n": "7"}
    assert m.durable is True
    assert 59 <= m.ttl <= 60  # seconds, as Proton gives header.ttl
    pub.publish("xp/a/t", b"\x00\x01", qos=0)
    m = receiver.receive(timeout=10)
    receiver.accept()
    assert bytes(m.body) == b"\x00\x01" and not m.durable
    pub.close()


def test_mqtt311_bytes_to_amqp(broker, amqp):
    receiver = amqp.create_receiver("xp.b", options=Capabilities("topic"))
    pub = Client(broker, V311)
    pub.publish("xp/b", b"raw\xff", qos=1)
    m = receiver.receive(timeout=10)
    receiver.accept()
    assert bytes(m.body) == b"raw\xff"
    pub.close()


def test_amqp_to_mqtt5(broker, amqp):
    sub = Client(broker, V5)
    sub.subscribe("xq/#", qos=2)
    sender = amqp.create_sender("xq.c", options=Capabilities("topic", on_source=False))
    sender.send(Message(body="text body", correlation_id="abc", reply_to="replies.d2", content_type="text/plain",
                        properties={"n": 5, "s": "x"}, durable=True, ttl=30))
    sender.send(Message(body={"k": "v"}, durable=False))
    got = sub.wait_messages(2)
    first, second = got
    assert first.topic == "xq/c" and first.payload == b"text body" and first.qos == 1
    p = first.properties
    assert p.PayloadFormatIndicator == 1
    assert p.CorrelationData == b"abc"
    assert p.ResponseTopic == "replies/d2"
    assert p.ContentType == "text/plain"
    assert p.UserProperty == [("n", "5"), ("s", "x")]
    assert 29 <= p.MessageExpiryInterval <= 30
    assert second.qos == 0
    assert second.properties.ContentType == "application/x-amqp-value"
    assert decode(second.payload)[0] == {"k": "v"}
    sub.close()


def test_amqp_to_mqtt311(broker, amqp):
    sub = Client(broker, V311)
    sub.subscribe("xr/t", qos=1)
    sender = amqp.create_sender("xr.t", options=Capabilities("topic", on_source=False))
    sender.send(Message(body=b"bin", durable=True))
    (m,) = sub.wait_messages(1)
    assert (m.payload, m.qos) == (b"bin", 1)
    sub.close()
