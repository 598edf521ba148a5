"""Selectors on the wire: consumer filters on queues and topics, queue filters, no-local,
and the refusal of a selector that does not parse."""
from __future__ import annotations

import pytest
from proton import Message
from proton.reactor import Filter
from proton.utils import LinkDetached
from proton import Described, symbol

from wire_helpers import Selector, connect, nothing_more, receive_bodies, settle_modified, topic


def send_props(conn, address, rows, **fields):
    sender = conn.create_sender(address)
    for body, props in rows:
        sender.send(Message(body=body, properties=props, **fields))
    sender.close()


def test_selector_on_a_queue_filters_only_that_consumer(broker):
    conn = connect(broker.url)
    eu = conn.create_receiver("sel.orders", name="eu", options=[Selector("region = 'EU' AND price > 100")])
    send_props(conn, "sel.orders", [("a", {"region": "EU", "price": 150}), ("b", {"region": "US", "price": 500}),
                                    ("c", {"region": "EU", "price": 50}), ("d", {"region": "EU", "price": 101})])
    assert receive_bodies(eu, 2) == ["a", "d"]
    assert nothing_more(eu)
    rest = conn.create_receiver("sel.orders", name="rest")
    assert receive_bodies(rest, 2) == ["b", "c"]  # nobody else's selector took them away
    conn.close()


def test_selector_on_a_topic_subscription_with_jms_header_names(broker):
    conn = connect(broker.url)
    urgent = conn.create_receiver("sel.news", name="urgent", options=[topic(), Selector("JMSPriority > 6")])
    everyone = conn.create_receiver("sel.news", name="all", options=[topic()])
    sender = conn.create_sender("topic://sel.news")
    for body, priority in (("low", 1), ("high", 9), ("mid", 5)):
        sender.send(Message(body=body, priority=priority))
    assert receive_bodies(urgent, 1) == ["high"]
    assert nothing_more(urgent)
    assert sorted(receive_bodies(everyone, 3)) == ["high", "low", "mid"]
    conn.close()


def test_subscription_selector_is_the_queue_filter(broker):
    from hermod.broker.tools.clients import management_call
    conn = connect(broker.url)
    conn.create_receiver("sel.sub", name="s", options=[topic(), Selector("kind = 'keep'")])
    send_props(conn, "topic://sel.sub", [("x", {"kind": "drop"}), ("y", {"kind": "keep"})])
    rows = [r for r in management_call(broker.url, "queue.stat") if r["address"] == "sel.sub"]
    assert [r["added"] for r in rows] == [1]  # the non-matching message was never stored
    conn.close()


def test_invalid_selector_is_refused_with_invalid_field_and_the_position(broker):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("sel.bad", options=[Selector("price >> 5")])
    assert e.value.condition == "amqp:invalid-field"
    assert "position" in str(e.value)
    conn.close()


def test_configured_queue_filter(start_broker):
    b = start_broker(config="""
[[address]]
name = "sel.cfg"
  [[address.queue]]
  name = "sel.cfg"
  filter = "priority > 5"
""")
    conn = connect(b.url)
    send_props(conn, "sel.cfg", [("no", {"priority": 1}), ("yes", {"priority": 7})])
    assert receive_bodies(conn.create_receiver("sel.cfg"), 1) == ["yes"]
    conn.close()


def test_configured_invalid_filter_names_the_key(start_broker, tmp_path):
    import subprocess
    import sys
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[[address]]\nname = "a"\n  [[address.queue]]\n  name = "a"\n  filter = "x = = 1"\n')
    r = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--config", str(cfg), "--store", "memory"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "address[0].queue[0].filter: invalid selector" in r.stderr
    assert "position" in r.stderr


class NoLocal(Filter):
    def __init__(self):
        super().__init__({symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])})


def test_no_local_subscription_skips_its_own_connections_messages(broker):
    mine = connect(broker.url, container_id="me")
    other = connect(broker.url, container_id="other")
    sub = mine.create_receiver("sel.nl", name="nl", options=[topic(), NoLocal()])
    mine.create_sender("topic://sel.nl").send(Message(body="from me"))
    other.create_sender("topic://sel.nl").send(Message(body="from other"))
    assert receive_bodies(sub, 1) == ["from other"]
    assert nothing_more(sub)
    mine.close()
    other.close()


@pytest.mark.parametrize("selector, matched", [
    ("JMSRedelivered = TRUE", True),
    ("JMSXDeliveryCount = 2", True),
    ("JMSRedelivered = FALSE", False),
    ("JMSXDeliveryCount = 1", False),
])
def test_a_selector_sees_the_delivery_count_of_a_redelivered_message(broker, selector, matched):
    conn = connect(broker.url)
    send_props(conn, "sel.redelivered", [("again", {})])
    first = conn.create_receiver("sel.redelivered", name="first", credit=1)
    assert receive_bodies(first, 1, settle=False) == ["again"]
    settle_modified(first, failed=True)  # one failed delivery: the next one is the second
    first.close()
    chooser = conn.create_receiver("sel.redelivered", name="chooser", options=[Selector(selector)], credit=1)
    if matched:
        assert receive_bodies(chooser, 1) == ["again"]
    else:
        assert nothing_more(chooser)
        chooser.close()
        plain = conn.create_receiver("sel.redelivered", name="plain", credit=1)
        assert receive_bodies(plain, 1) == ["again"]  # still there, skipped by the selector only
    conn.close()
