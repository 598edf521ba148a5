"""Every row of the contract's "AMQP names a client uses" table, against a real broker."""
from __future__ import annotations

import pytest
from proton import Delivery, Message
from proton.utils import LinkDetached, SendException


from hermod.broker.tools.clients import management_call
from wire_helpers import (Browse, Caps, DurableSubscription, Shared, connect,
                          nothing_more, queue, receive_bodies, send, sync, topic)


def queues(url: str) -> dict[str, dict]:
    """queue name -> stat row (the management call's own reply queue is not listed)."""
    return {r["queue"]: r for r in management_call(url, "queue.stat")}


def test_anycast_send_and_receive_on_a_new_address(broker):
    conn = connect(broker.url)
    send(conn, "orders", ["a", "b", "c"])
    r = conn.create_receiver("orders")
    assert receive_bodies(r, 3) == ["a", "b", "c"]
    sync(conn)
    q = queues(broker.url)["orders"]
    assert (q["address"], q["routing_type"], q["added"], q["acked"], q["messages"]) == ("orders", "anycast", 3, 3, 0)
    conn.close()


def test_auto_created_queue_goes_when_drained_and_unconsumed(broker):
    conn = connect(broker.url)
    send(conn, "transient", ["a"])
    r = conn.create_receiver("transient")
    assert receive_bodies(r, 1) == ["a"]
    r.close()
    assert "transient" not in queues(broker.url)
    conn.close()


@pytest.mark.parametrize("target", ["anycast://orders", "queue://orders"])
def test_anycast_prefixes_on_targets(broker, target):
    conn = connect(broker.url)
    send(conn, target, ["x"])
    assert receive_bodies(conn.create_receiver("orders", options=[queue()]), 1) == ["x"]
    assert "orders" in queues(broker.url)
    conn.close()


def test_queue_capability_on_target(broker):
    conn = connect(broker.url)
    send(conn, "orders", ["x"], options=[Caps("queue", on="target")])
    assert receive_bodies(conn.create_receiver("orders"), 1) == ["x"]
    conn.close()


def test_anycast_consumers_share_messages_round_robin(broker):
    conn = connect(broker.url)
    r1 = conn.create_receiver("work", name="r1", credit=10)
    r2 = conn.create_receiver("work", name="r2", credit=10)
    send(conn, "work", list(range(6)))
    assert sorted(receive_bodies(r1, 3) + receive_bodies(r2, 3)) == list(range(6))
    assert nothing_more(r1) and nothing_more(r2)
    conn.close()


@pytest.mark.parametrize("how", ["capability", "multicast://", "topic://"])
def test_multicast_send_reaches_every_subscriber(broker, how):
    conn = connect(broker.url)
    s1 = conn.create_receiver("news", name="s1", options=[topic()])
    s2 = conn.create_receiver("news", name="s2", options=[topic()])
    if how == "capability":
        send(conn, "news", ["hello"], options=[Caps("topic", on="target")])
    else:
        send(conn, how + "news", ["hello"])
    assert receive_bodies(s1, 1) == ["hello"]
    assert receive_bodies(s2, 1) == ["hello"]
    conn.close()


def test_multicast_with_no_subscriber_is_dropped(broker):
    conn = connect(broker.url)
    send(conn, "topic://quiet", ["lost"])
    s = conn.create_receiver("quiet", options=[topic()])
    send(conn, "topic://quiet", ["seen"])
    assert receive_bodies(s, 1) == ["seen"]
    assert nothing_more(s)
    conn.close()


ORDERS_TWO_QUEUES = """
[[address]]
name = "orders"
routing = ["multicast"]
  [[address.queue]]
  name = "q1"
  routing = "multicast"
  [[address.queue]]
  name = "q2"
  routing = "multicast"
"""


def test_fully_qualified_queue_name_as_source(start_broker):
    b = start_broker(config=ORDERS_TWO_QUEUES)
    conn = connect(b.url)
    send(conn, "topic://orders", ["o1"])
    assert receive_bodies(conn.create_receiver("orders::q1"), 1) == ["o1"]
    assert receive_bodies(conn.create_receiver("orders::q2"), 1) == ["o1"]
    conn.close()


def test_fully_qualified_queue_name_as_target_reaches_only_that_queue(start_broker):
    b = start_broker(config=ORDERS_TWO_QUEUES)
    conn = connect(b.url)
    send(conn, "orders::q2", ["only-q2"])
    stats = queues(b.url)
    assert (stats["q1"]["messages"], stats["q2"]["messages"]) == (0, 1)
    conn.close()


def test_fqqn_naming_a_missing_queue_is_not_found(start_broker):
    b = start_broker(config="""
[[address]]
name = "orders"
routing = ["anycast"]
""")
    conn = connect(b.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_sender("orders::nope")
    assert e.value.condition == "amqp:not-found"
    conn.close()


def test_anonymous_relay_uses_each_messages_to(broker):
    conn = connect(broker.url)
    a = conn.create_receiver("relay.a")
    b = conn.create_receiver("relay.b")
    sender = conn.create_sender(None)
    sender.send(Message(address="relay.a", body="for a"))
    sender.send(Message(address="relay.b", body="for b"))
    assert receive_bodies(a, 1) == ["for a"]
    m = b.receive(timeout=10)
    b.accept()
    assert (m.body, m.address) == ("for b", "relay.b")
    conn.close()


def test_anonymous_relay_without_to_is_rejected(broker):
    conn = connect(broker.url)
    sender = conn.create_sender(None)
    with pytest.raises(SendException) as e:
        sender.send(Message(body="nowhere"))
    assert e.value.state == Delivery.REJECTED
    conn.close()


def test_anonymous_relay_routing_type_annotation(broker):
    conn = connect(broker.url)
    sub = conn.create_receiver("relay.t", options=[topic()])
    sender = conn.create_sender(None)
    from proton import byte
    sender.send(Message(address="relay.t", body="mc", annotations={"x-opt-routing-type": byte(0)}))
    assert receive_bodies(sub, 1) == ["mc"]
    conn.close()


def test_dynamic_source_is_a_temporary_queue_removed_with_its_link(broker):
    conn = connect(broker.url)
    r = conn.create_receiver(None, dynamic=True)
    name = r.link.remote_source.address
    assert name
    send(conn, name, ["reply"])
    assert receive_bodies(r, 1) == ["reply"]
    assert name in queues(broker.url)
    r.close()
    assert name not in queues(broker.url)
    conn.close()


def test_browser_sees_a_snapshot_without_taking(broker):
    conn = connect(broker.url)
    send(conn, "browsed", ["1", "2"])
    b = conn.create_receiver("browsed", name="browser", options=[Browse()])
    assert receive_bodies(b, 2) == ["1", "2"]
    send(conn, "browsed", ["3"])
    assert nothing_more(b)  # later arrivals are not part of the snapshot
    c = conn.create_receiver("browsed")
    assert receive_bodies(c, 3) == ["1", "2", "3"]  # nothing was taken by the browser
    conn.close()


def test_durable_subscription_named_cid_dot_link_survives_detach(broker):
    conn = connect(broker.url, container_id="cid")
    sub = conn.create_receiver("prices", name="sub", options=[topic(), DurableSubscription()])
    assert "cid.sub" in queues(broker.url)
    sub.detach()
    send(conn, "topic://prices", ["while away"])
    assert queues(broker.url)["cid.sub"]["messages"] == 1
    again = conn.create_receiver("prices", name="sub", options=[topic(), DurableSubscription()])
    assert receive_bodies(again, 1) == ["while away"]
    again.close()  # close = unsubscribe
    assert "cid.sub" not in queues(broker.url)
    conn.close()


def test_attach_with_no_source_finds_the_durable_subscription(broker):
    conn = connect(broker.url, container_id="cid2")
    sub = conn.create_receiver("ticks", name="mysub", options=[topic(), DurableSubscription()])
    sub.detach()
    send(conn, "topic://ticks", ["t1"])

    class NoSource(DurableSubscription):
        def apply(self, link):
            link.source.type = link.source.UNSPECIFIED

    again = conn.create_receiver(None, name="mysub", options=[NoSource()])
    assert again.link.remote_source.address == "cid2.mysub"
    assert receive_bodies(again, 1) == ["t1"]
    conn.close()


def test_attach_with_no_source_for_unknown_subscription_is_not_found(broker):
    conn = connect(broker.url, container_id="cid3")

    class NoSource(DurableSubscription):
        def apply(self, link):
            link.source.type = link.source.UNSPECIFIED

    with pytest.raises(LinkDetached) as e:
        conn.create_receiver(None, name="ghost", options=[NoSource()])
    assert e.value.condition == "amqp:not-found"
    conn.close()


def test_shared_non_durable_subscription_is_shared_and_goes_with_last_consumer(broker):
    c1 = connect(broker.url, container_id="app")
    c2 = connect(broker.url, container_id="app")
    s1 = c1.create_receiver("events", name="sub|volatile1", options=[Shared()], credit=10)
    s2 = c2.create_receiver("events", name="sub|volatile2", options=[Shared()], credit=10)
    assert "app.sub:shared-volatile" in queues(c1.url if hasattr(c1, "url") else broker.url)
    send(c1, "topic://events", list(range(4)))
    got = receive_bodies(s1, 2) + receive_bodies(s2, 2)
    assert sorted(got) == [0, 1, 2, 3]
    s1.close()
    s2.close()
    assert "app.sub:shared-volatile" not in queues(broker.url)
    c1.close()
    c2.close()


def test_shared_durable_subscription_without_client_id_is_global(broker):
    conn = connect(broker.url, container_id="")

    class SharedGlobal(DurableSubscription):
        def apply(self, link):
            super().apply(link)
            Caps("topic", "shared", "global").apply(link)

    s = conn.create_receiver("alerts", name="sub|global", options=[SharedGlobal()])
    assert "sub:global" in queues(broker.url)
    s.detach()
    conn.close()


def test_non_durable_subscription_is_private_and_removed_on_close(broker):
    conn = connect(broker.url)
    before = set(queues(broker.url))
    s = conn.create_receiver("feed", options=[topic()])
    added = set(queues(broker.url)) - before
    assert len(added) == 1
    s.close()
    assert not (set(queues(broker.url)) & added)
    conn.close()


def test_temporary_queue_goes_when_its_session_ends(broker):
    conn = connect(broker.url)
    session = conn.conn.session()
    session.open()
    receiver = session.receiver("temp-in-session")
    receiver.source.dynamic = True
    receiver.open()
    conn.wait(lambda: receiver.remote_source.address is not None, msg="dynamic attach")
    name = receiver.remote_source.address
    assert name in queues(broker.url)
    session.close()
    conn.wait(lambda: session.state & session.REMOTE_CLOSED, msg="session end")
    assert name not in queues(broker.url)
    conn.close()
