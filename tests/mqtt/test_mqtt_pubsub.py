"""The MQTT adapter end to end with paho-mqtt, 3.1.1 and 5.0: connect, publish at QoS 0, 1 and
2, subscribe with wildcards, multicast fan-out, unsubscribe, and delivery at the lower QoS."""
from __future__ import annotations

import pytest

from hermod_testing import wait_for
from mqtt_clients import V5, VERSIONS, Client

pytestmark = pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


def test_publish_and_subscribe_each_qos(broker, version):
    sub = Client(broker, version)
    assert sub.connack[0] == 0
    assert sub.subscribe("pq/+/temp", qos=2) == [2]
    pub = Client(broker, version)
    for qos in (0, 1, 2):
        pub.publish(f"pq/line{qos}/temp", f"m{qos}".encode(), qos=qos)
    got = sub.wait_messages(3)
    assert sorted((m.topic, m.payload, m.qos) for m in got) == [
        ("pq/line0/temp", b"m0", 0), ("pq/line1/temp", b"m1", 1), ("pq/line2/temp", b"m2", 2)]
    pub.close()
    sub.close()


def test_delivery_at_the_lower_qos_and_fanout(broker, version):
    subs = [Client(broker, version) for _ in range(3)]
    for i, s in enumerate(subs):
        assert s.subscribe("fan/#", qos=i) == [i]
    pub = Client(broker, version)
    pub.publish("fan/a/b", b"x", qos=2)
    for i, s in enumerate(subs):
        (m,) = s.wait_messages(1)
        assert (m.topic, m.payload, m.qos) == ("fan/a/b", b"x", i)
    for s in subs + [pub]:
        s.close()


def test_unsubscribe_stops_delivery(broker, version):
    sub = Client(broker, version)
    sub.subscribe("un/t", qos=1)
    pub = Client(broker, version)
    pub.publish("un/t", b"1", qos=1)
    sub.wait_messages(1)
    codes = sub.unsubscribe("un/t")
    if version == V5:
        assert codes == [0]
        assert sub.unsubscribe("un/never") == [0x11]
    pub.publish("un/t", b"2", qos=1)
    marker = Client(broker, version)
    marker.subscribe("un/t", qos=1)
    pub.publish("un/t", b"3", qos=1)
    marker.wait_messages(1)
    assert sub.payloads() == [b"1"]
    for c in (sub, pub, marker):
        c.close()


def test_dollar_topics_not_matched_by_leading_wildcards(broker, version):
    wild = Client(broker, version)
    wild.subscribe("#", qos=1)
    plus = Client(broker, version)
    plus.subscribe("+/stats", qos=1)
    exact = Client(broker, version)
    exact.subscribe("$app/stats", qos=1)
    pub = Client(broker, version)
    pub.publish("$app/stats", b"dollar", qos=1)
    assert exact.wait_messages(1)[0].payload == b"dollar"
    pub.publish("dl/stats", b"plain", qos=1)
    wait_for(lambda: b"plain" in wild.payloads())
    assert b"dollar" not in wild.payloads()
    wait_for(lambda: plus.payloads() == [b"plain"])
    for c in (wild, plus, exact, pub):
        c.close()


def test_a_long_qos0_stream_keeps_flowing(broker, version):
    """QoS 0 deliveries are acknowledged by nobody: their credit is given back as they are written."""
    sub = Client(broker, version)
    sub.subscribe("stream/t", qos=0)
    pub = Client(broker, version)
    for i in range(1000):
        pub.publish("stream/t", str(i).encode(), qos=0)
    pub.publish("stream/t", b"end", qos=1)
    got = sub.wait_messages(1001, timeout=30)
    assert [m.payload for m in got][:3] == [b"0", b"1", b"2"] and got[-1].payload == b"end"
    sub.close()
    pub.close()
