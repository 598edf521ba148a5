"""Persistent MQTT sessions: a durable subscription queue CLIENTID.ADDRESS per filter that keeps
QoS 1 and 2 messages while the client is away and across a broker restart; redelivery with DUP;
5.0 session expiry; QoS 2 inbound state (a PUBLISH resent after reconnecting is not delivered
twice); shared subscriptions `$share/GROUP/FILTER` as the shared queue GROUP, reachable over AMQP
as ADDRESS::GROUP."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from proton.utils import BlockingConnection

from hermod.broker.mqtt import Disconnect, PubAck, Publish, PubComp, PubRec, PubRel, Subscribe, Subscription
from hermod.broker.mqtt.properties import Properties
from hermod_testing import wait_for
from mqtt_clients import V5, V311, VERSIONS, Client, Raw, connect_props

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "http"))
from http_helpers import call, http_url  # noqa: E402


def session_props(version, seconds=3600):
    return connect_props(SessionExpiryInterval=seconds) if version == V5 else None


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_persistent_session_keeps_messages_across_a_restart(start_broker, tmp_path, version):
    db = tmp_path / "mqtt.db"
    broker = start_broker(store=f"sqlite:///{db}")
    cid = f"keep-{version}"
    sub = Client(broker, version, client_id=cid, clean=False, properties=session_props(version))
    assert sub.subscribe("plant/+/temp", qos=1) == [1]
    sub.close()
    pub = Client(broker, version)
    for i in range(3):
        pub.publish(f"plant/l{i}/temp", f"t{i}".encode(), qos=1)
    pub.close()
    broker.stop()
    broker = start_broker(store=f"sqlite:///{db}")
    again = Client(broker, version, client_id=cid, clean=False, properties=session_props(version))
    assert again.connack[1] is True  # session present
    got = again.wait_messages(3)
    assert sorted(m.payload for m in got) == [b"t0", b"t1", b"t2"]
    assert all(m.qos == 1 for m in got)
    again.close()


def test_subscription_queue_is_named_clientid_dot_address_and_reachable_over_amqp(start_broker):
    broker = start_broker()
    sub = Client(broker, V311, client_id="dev7", clean=False)
    sub.subscribe("site/a/b", qos=1)
    sub.close()
    pub = Client(broker, V311)
    pub.publish("site/a/b", b"hello", qos=1)
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = conn.create_receiver("site.a.b::dev7.site.a.b")
        m = receiver.receive(timeout=10)
        assert bytes(m.body) == b"hello"
        receiver.accept()
    finally:
        conn.close()
    pub.close()


def test_in_flight_message_redelivered_with_dup(start_broker):
    broker = start_broker()
    raw = Raw(broker, "dupper", clean=False)
    raw.send(Subscribe(1, [Subscription("dup/t", 1)]))
    raw.recv()  # SUBACK
    pub = Client(broker, V311)
    pub.publish("dup/t", b"once", qos=1)
    first = raw.recv_type(Publish)
    assert first.payload == b"once" and not first.dup
    raw.close()  # never acknowledged
    again = Raw(broker, "dupper", clean=False)
    assert again.connack.session_present
    second = again.recv_type(Publish)
    assert second.payload == b"once" and second.dup
    again.send(PubAck(second.packet_id))
    again.close()
    pub.close()


def test_qos2_resent_after_reconnect_is_delivered_once(start_broker):
    broker = start_broker()
    sub = Client(broker, V311)
    sub.subscribe("q2/t", qos=2)
    raw = Raw(broker, "q2pub", clean=False)
    raw.send(Publish("q2/t", b"exactly", 2, packet_id=7))
    assert isinstance(raw.recv_type(PubRec), PubRec)
    raw.close()  # PUBREL never sent: the client resends the PUBLISH after reconnecting
    again = Raw(broker, "q2pub", clean=False)
    again.send(Publish("q2/t", b"exactly", 2, dup=True, packet_id=7))
    assert again.recv_type(PubRec).packet_id == 7
    again.send(PubRel(7))
    assert again.recv_type(PubComp).packet_id == 7
    marker = Client(broker, V311)
    marker.publish("q2/t", b"marker", qos=1)
    wait_for(lambda: b"marker" in sub.payloads())
    assert sub.payloads() == [b"exactly", b"marker"]
    for c in (again,):
        c.close()
    sub.close()
    marker.close()


def test_v5_session_expiry(start_broker):
    broker = start_broker()
    raw = Raw(broker, "exp1", version=5, clean=False, properties=Properties(session_expiry_interval=1))
    raw.send(Subscribe(1, [Subscription("exp/t", 1)]))
    raw.recv()
    raw.send(Disconnect())
    raw.close()
    base = http_url(broker)
    assert call(base, "GET", "/api/queues/exp1.exp.t")[0] == 200  # kept while the session lasts
    wait_for(lambda: call(base, "GET", "/api/queues/exp1.exp.t")[0] == 404, timeout=10,
             message="the session's queue deleted at its expiry")
    probe = Raw(broker, "exp1", version=5, clean=False)
    assert not probe.connack.session_present
    probe.close()


def test_v5_clean_start_false_with_no_expiry_ends_with_the_connection(start_broker):
    broker = start_broker()
    raw = Raw(broker, "exp0", version=5, clean=False)
    raw.send(Subscribe(1, [Subscription("exp0/t", 1)]))
    raw.recv()
    raw.send(Disconnect())
    raw.close()
    probe = Raw(broker, "exp0", version=5, clean=False)
    assert not probe.connack.session_present
    probe.close()


@pytest.mark.parametrize("version", VERSIONS, ids=["v311", "v5"])
def test_shared_subscription_is_the_group_queue(start_broker, version):
    broker = start_broker()
    a = Client(broker, version)
    b = Client(broker, version)
    assert a.subscribe("$share/g1/sh/t", qos=1) == [1]
    assert b.subscribe("$share/g1/sh/t", qos=1) == [1]
    conn = BlockingConnection(broker.url, timeout=10)
    receiver = conn.create_receiver("sh.t::g1")
    pub = Client(broker, version)
    for i in range(30):
        pub.publish("sh/t", f"{i}".encode(), qos=1)
    got_amqp = []
    wait_for(lambda: len(a.messages) + len(b.messages) + len(got_amqp) >= 30 or _take(receiver, got_amqp))
    total = sorted(int(p) for p in a.payloads() + b.payloads() + got_amqp)
    assert total == list(range(30))  # each message once, across the group
    assert a.messages and b.messages
    conn.close()
    for c in (a, b, pub):
        c.close()


def _take(receiver, into) -> bool:
    try:
        m = receiver.receive(timeout=0.05)
    except Exception:  # noqa: BLE001 - nothing there yet
        return False
    receiver.accept()
    into.append(bytes(m.body).decode())
    return False


def test_qos2_state_survives_a_broker_restart(start_broker, tmp_path):
    """PUBREC received, then the broker restarts before the PUBREL: the client's resend after
    reconnecting is answered and not delivered a second time; a later PUBLISH reusing the
    identifier after PUBCOMP is a new message."""
    db = tmp_path / "q2.db"
    broker = start_broker(store=f"sqlite:///{db}")
    keeper = Client(broker, V311, client_id="q2-keeper", clean=False)
    keeper.subscribe("q2r/t", qos=2)
    keeper.close()
    raw = Raw(broker, "q2-restart", clean=False)
    raw.send(Publish("q2r/t", b"exactly-once", 2, packet_id=11))
    assert raw.recv_type(PubRec).packet_id == 11
    raw.close()
    broker.stop()
    broker = start_broker(store=f"sqlite:///{db}")
    again = Raw(broker, "q2-restart", clean=False)
    assert again.connack.session_present
    again.send(Publish("q2r/t", b"exactly-once", 2, dup=True, packet_id=11))
    assert again.recv_type(PubRec).packet_id == 11
    again.send(PubRel(11))
    assert again.recv_type(PubComp).packet_id == 11
    again.send(Publish("q2r/t", b"next", 2, packet_id=11))  # the identifier reused: a new message
    assert again.recv_type(PubRec).packet_id == 11
    again.send(PubRel(11))
    assert again.recv_type(PubComp).packet_id == 11
    back = Client(broker, V311, client_id="q2-keeper", clean=False)
    got = back.wait_messages(2)
    assert [m.payload for m in got] == [b"exactly-once", b"next"]
    again.close()
    back.close()


def test_v5_session_expiry_counts_after_a_restart(start_broker, tmp_path):
    """A session with a finite expiry found again after a restart expires (counted from the
    restart), once the broker serves MQTT again."""
    db = tmp_path / "exp.db"
    broker = start_broker(store=f"sqlite:///{db}")
    raw = Raw(broker, "exp-r", version=5, clean=False, properties=Properties(session_expiry_interval=2))
    raw.send(Subscribe(1, [Subscription("expr/t", 1)]))
    raw.recv()
    raw.close()
    broker.stop()
    broker = start_broker(store=f"sqlite:///{db}")
    base = http_url(broker)
    assert call(base, "GET", "/api/queues/exp-r.expr.t")[0] == 200
    Client(broker, V5).close()  # any MQTT client: the registry starts (and with it the countdowns)
    wait_for(lambda: call(base, "GET", "/api/queues/exp-r.expr.t")[0] == 404, timeout=10,
             message="the recovered session's queue deleted at its expiry")
