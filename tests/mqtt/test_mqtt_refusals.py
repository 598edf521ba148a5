"""MQTT refusals with the specification's reason codes: a full address under the `fail` policy
(5.0 PUBACK 0x97; 3.1.1 closes), the `block` policy (the PUBACK withheld until there is room),
a payload format indicator 1 with a payload that is not UTF-8 (0x99), a subscription refused
by permissions (0x87) while the rest of the SUBSCRIBE is granted, and retained messages of
addresses the subscriber may not consume kept from its wildcard subscription."""
from __future__ import annotations

import pytest

from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for
from hermod.broker.mqtt import SubAck, Subscribe, Subscription
from mqtt_clients import V5, V311, Client, Raw, connect_props, props

CONFIG = """
[[address_settings]]
match = "full.#"
max_size_bytes = 2000
address_full_policy = "fail"

[[address_settings]]
match = "blk.#"
max_size_bytes = 2000
address_full_policy = "block"

[security]
anonymous = false
""" + "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(n + "-pw", iterations=64)}"\nroles = ["{n}"]\n'
    for n in ("admin", "limited")) + """
[[security.permission]]
match = "#"
send = ["admin"]
consume = ["admin"]
browse = ["admin"]
create_address = ["admin"]
create_durable_queue = ["admin"]
delete_queue = ["admin"]
manage = ["admin"]

[[security.permission]]
match = "open.#"
send = ["admin", "limited"]
consume = ["admin", "limited"]
create_address = ["admin", "limited"]
create_durable_queue = ["admin", "limited"]

[[security.permission]]
match = "open.secret.#"
send = ["admin"]
consume = ["admin"]
create_address = ["admin"]
"""


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config=CONFIG)


def admin(broker, version=V5):
    return Client(broker, version, username="admin", password="admin-pw")


def limited(broker, version=V5):
    return Client(broker, version, username="limited", password="limited-pw")


def test_full_address_fail_policy(broker):
    # A persistent session away: its queue on full.t fills up to the address's 2,000 bytes.
    keeper = Client(broker, V5, client_id="full-keeper", clean=False, username="admin", password="admin-pw",
                    properties=connect_props(SessionExpiryInterval=600))
    keeper.subscribe("full/t", qos=1)
    keeper.close()
    pub = admin(broker)
    acks: dict[int, int] = {}
    pub.c.on_publish = lambda cl, ud, mid, rc, p: acks.__setitem__(mid, rc.value)
    infos = [pub.publish("full/t", b"x" * 500, qos=1, wait=False) for _ in range(10)]
    wait_for(lambda: len(acks) == 10)
    codes = [acks[i.mid] for i in infos]
    assert codes[:4] == [0] * 4 and codes[-1] == 0x97, codes
    pub.close()


def test_payload_format_invalid(broker):
    pub = admin(broker)
    acks: dict[int, int] = {}
    pub.c.on_publish = lambda cl, ud, mid, rc, p: acks.__setitem__(mid, rc.value)
    info = pub.publish("open/pf", b"\xff\xfe", qos=1, wait=False, properties=props(PayloadFormatIndicator=1))
    wait_for(lambda: info.mid in acks)
    assert acks[info.mid] == 0x99
    pub.close()


@pytest.mark.parametrize("version", [V311, V5], ids=["v311", "v5"])
def test_subscribe_partly_refused(broker, version):
    c = limited(broker, version)
    codes = c.subscribe([("open/ok", 1), ("open/secret/x", 1)])
    # paho reads a 3.1.1 failure (0x80) as 0x80 too
    assert codes == [1, 0x87 if version == V5 else 0x80]
    c.close()


def test_retained_of_forbidden_addresses_not_sent_to_a_wildcard(broker):
    a = admin(broker)
    a.publish("open/r/pub", b"visible", qos=1, retain=True)
    a.publish("open/secret/r", b"hidden", qos=1, retain=True)
    a.close()
    c = limited(broker)
    assert c.subscribe("open/#", qos=1) == [1]
    c.wait_messages(1)
    marker = admin(broker)
    marker.publish("open/marker", b"m", qos=1)
    wait_for(lambda: b"m" in c.payloads())
    assert b"hidden" not in c.payloads() and b"visible" in c.payloads()
    marker.close()
    c.close()


def test_full_address_block_policy_withholds_until_room(broker):
    keeper = Client(broker, V5, client_id="blk-keeper", clean=False, username="admin", password="admin-pw",
                    properties=connect_props(SessionExpiryInterval=600))
    keeper.subscribe("blk/t", qos=1)
    keeper.close()
    pub = admin(broker)
    acks: dict[int, int] = {}
    pub.c.on_publish = lambda cl, ud, mid, rc, p: acks.__setitem__(mid, rc.value)
    infos = [pub.publish("blk/t", b"y" * 500 + bytes([i]), qos=1, wait=False) for i in range(10)]
    wait_for(lambda: len(acks) >= 4)
    assert len(acks) < 10  # the rest wait: the broker stopped reading the publisher
    back = Client(broker, V5, client_id="blk-keeper", clean=False, username="admin", password="admin-pw",
                  properties=connect_props(SessionExpiryInterval=600))
    back.wait_messages(10, timeout=20)
    wait_for(lambda: len(acks) == 10)
    assert {acks[i.mid] for i in infos} == {0}
    assert sorted(p[-1] for p in back.payloads()) == list(range(10))
    back.close()
    pub.close()


def test_invalid_topic_filter_refused_in_its_place(broker):
    raw = Raw(broker, "bad-filter", version=5, username="admin", password=b"admin-pw")
    raw.send(Subscribe(1, [Subscription("open/ok2", 1), Subscription("open/#/x", 1), Subscription("open/a+", 0)]))
    ack = raw.recv_type(SubAck)
    assert ack.reason_codes == [1, 0x8F, 0x8F]
    raw.close()


def test_unsubscribing_a_persistent_subscription_needs_delete_queue(broker):
    """Unsubscribing a session's durable subscription deletes its queue: `delete_queue`, as
    closing a durable subscription over AMQP (5.0 UNSUBACK 0x87 without it; the subscription stays)."""
    c = Client(broker, V5, client_id="unsub-limited", clean=False, username="limited", password="limited-pw",
               properties=connect_props(SessionExpiryInterval=600))
    assert c.subscribe("open/keep", qos=1) == [1]
    assert c.unsubscribe("open/keep") == [0x87]
    feeder = admin(broker)
    feeder.publish("open/keep", b"still", qos=1)
    assert c.wait_messages(1)[0].payload == b"still"
    feeder.close()
    c.close()
