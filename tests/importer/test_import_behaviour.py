"""The imported configuration, run by a real broker, routes as the original product would:
virtual topics, composite destinations (filtered, forwardOnly), diverts (exclusive or not) and
security settings. Each test imports a fixture with `hermod import`, starts `hermod run` on it
(port 0) and uses real AMQP clients."""
from __future__ import annotations

import pytest
from proton import ConnectionException, Message
from proton.utils import LinkDetached

from hermod_testing import BrokerProcess
from importing import bodies, connect, imported, nothing_more, send


@pytest.fixture
def run_imported(tmp_path):
    started = []

    def run(product: str, fixture: str) -> str:
        config = imported(tmp_path, product, fixture)
        b = BrokerProcess(["--port", "0", "--http-port", "-1", "--config", str(config)], tmp_path).start()
        started.append(b)
        return b.url

    yield run
    for b in started:
        b.stop()


# -- ActiveMQ Classic ------------------------------------------------------------------------------

def test_virtual_topic_consumer_queue_gets_the_topics_messages(run_imported):
    url = run_imported("activemq", "seed-classic/activemq.xml")
    conn = connect(url)
    group_a = conn.create_receiver("queue://Consumer.A.VirtualTopic.Orders")
    group_b = conn.create_receiver("queue://Consumer.B.VirtualTopic.Orders")
    send(conn, "topic://VirtualTopic.Orders", Message(body="order-1"), Message(body="order-2"))
    assert bodies(group_a, 2) == ["order-1", "order-2"]
    assert bodies(group_b, 2) == ["order-1", "order-2"]
    conn.close()


def test_composite_queue_forwards_with_its_filter_and_forward_only_false_keeps_a_copy(run_imported):
    url = run_imported("activemq", "seed-classic/activemq.xml")
    conn = connect(url)
    foo, odd = conn.create_receiver("queue://FOO"), conn.create_receiver("queue://ODD")
    own = conn.create_receiver("queue://MY.QUEUE")
    send(conn, "queue://MY.QUEUE", Message(body="one", properties={"odd": "yes"}),
         Message(body="two", properties={"odd": "no"}))
    assert bodies(foo, 2) == ["one", "two"]
    assert bodies(odd, 1) == ["one"]
    assert bodies(own, 2) == ["one", "two"]  # forwardOnly="false": the composite keeps them too
    assert nothing_more(odd)
    conn.close()


def test_composite_topic_forward_only_gives_its_subscribers_nothing(run_imported):
    url = run_imported("activemq", "seed-classic/activemq.xml")
    conn = connect(url)
    archive = conn.create_receiver("queue://NEWS.ARCHIVE")
    subscriber = conn.create_receiver("topic://NEWS")
    send(conn, "topic://NEWS", Message(body="headline"))
    assert bodies(archive, 1) == ["headline"]
    assert nothing_more(subscriber)
    conn.close()


# -- Artemis ---------------------------------------------------------------------------------------

def test_non_exclusive_divert_copies_and_the_address_keeps_the_message(run_imported):
    url = run_imported("artemis", "seed-artemis/broker.xml")
    conn = connect(url, user="alice", password="alice-pw")
    spy = conn.create_receiver("topic://spyTopic")
    orders = conn.create_receiver("queue://orders")
    send(conn, "queue://orders", Message(body="order-1"))
    assert bodies(orders, 1) == ["order-1"]
    assert bodies(spy, 1) == ["order-1"]
    conn.close()


def test_exclusive_divert_takes_only_matching_messages_away_from_the_address(run_imported):
    url = run_imported("artemis", "seed-artemis/broker.xml")
    conn = connect(url, user="alice", password="alice-pw")
    subscriber = conn.create_receiver("topic://priceUpdates")
    forwarded = conn.create_receiver("queue://priceForwarding")
    send(conn, "topic://priceUpdates", Message(body="ny", properties={"office": "New York"}),
         Message(body="ldn", properties={"office": "London"}))
    assert bodies(forwarded, 1) == ["ny"]
    assert bodies(subscriber, 1) == ["ldn"]
    assert nothing_more(forwarded) and nothing_more(subscriber)
    conn.close()


def test_security_setting_denies_a_send_to_a_role_without_send(run_imported):
    url = run_imported("artemis", "seed-artemis/broker.xml")
    bob = connect(url, user="bob", password="bob-pw")  # role consumer: consume, no send
    with pytest.raises(LinkDetached) as refused:
        bob.create_sender("queue://orders")
    assert refused.value.condition == "amqp:unauthorized-access", str(refused.value)
    receiver = bob.create_receiver("queue://orders")
    alice = connect(url, user="alice", password="alice-pw")
    send(alice, "queue://orders", Message(body="allowed"))
    assert bodies(receiver, 1) == ["allowed"]
    alice.close()
    bob.close()


def test_a_user_whose_password_was_hashed_cannot_log_in_until_given_one(run_imported):
    url = run_imported("artemis", "seed-artemis/broker.xml")
    with pytest.raises(ConnectionException):
        connect(url, user="carol", password="")
