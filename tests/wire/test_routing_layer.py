"""The routing layer's seed examples with real clients: virtual topics, composite destinations,
diverts, wildcard subscriptions, client-side composites."""
from __future__ import annotations

import subprocess
import sys

import pytest
from proton import Message

from wire_helpers import Selector, connect, nothing_more, receive_bodies, topic


def send(conn, address, *messages):
    s = conn.create_sender(address)
    for m in messages:
        s.send(m if isinstance(m, Message) else Message(body=m))
    s.close()


def test_virtual_topic_groups_a_and_b(broker):
    conn = connect(broker.url)
    a1 = conn.create_receiver("Consumer.A.VirtualTopic.Orders", name="a1", credit=10)
    a2 = conn.create_receiver("Consumer.A.VirtualTopic.Orders", name="a2", credit=10)
    b1 = conn.create_receiver("Consumer.B.VirtualTopic.Orders", name="b1", credit=10)
    plain = conn.create_receiver("VirtualTopic.Orders", name="plain", options=[topic()])
    send(conn, "VirtualTopic.Orders", *[f"o{i}" for i in range(6)])
    group_a = receive_bodies(a1, 3) + receive_bodies(a2, 3)
    assert sorted(group_a) == [f"o{i}" for i in range(6)]
    assert receive_bodies(b1, 6) == [f"o{i}" for i in range(6)]
    assert receive_bodies(plain, 6) == [f"o{i}" for i in range(6)]
    conn.close()


def test_virtual_topic_copy_records_its_original_destination(broker):
    conn = connect(broker.url)
    group = conn.create_receiver("Consumer.Z.VirtualTopic.Origin", name="z")
    send(conn, "VirtualTopic.Origin", "m")
    m = group.receive(timeout=10)
    group.accept()
    assert (m.body, m.annotations["x-opt-ORIG-ADDRESS"]) == ("m", "VirtualTopic.Origin")
    conn.close()


def test_virtual_topic_queue_keeps_collecting_while_its_consumers_are_away(broker):
    conn = connect(broker.url)
    conn.create_receiver("Consumer.C.VirtualTopic.Audit", name="c").close()
    send(conn, "VirtualTopic.Audit", "while away")
    again = conn.create_receiver("Consumer.C.VirtualTopic.Audit", name="c2")
    assert receive_bodies(again, 1) == ["while away"]
    conn.close()


COMPOSITES = """
[[composite]]
name = "MY.QUEUE"
kind = "queue"
  [[composite.forward]]
  queue = "FOO"
  [[composite.forward]]
  topic = "BAR"

[[composite]]
name = "IncomingOrders"
forward_only = false
  [[composite.forward]]
  queue = "Tap"

[[composite]]
name = "Filtered"
send_when_not_matched = true
  [[composite.forward]]
  queue = "ODD"
  selector = "odd = 'yes'"
  [[composite.forward]]
  queue = "FIVE"
  selector = "i = 5"
"""


def test_composite_forwards_to_queue_foo_and_topic_bar(start_broker):
    b = start_broker(config=COMPOSITES)
    conn = connect(b.url)
    bar = conn.create_receiver("BAR", name="bar", options=[topic()])
    send(conn, "MY.QUEUE", "m1")
    assert receive_bodies(conn.create_receiver("FOO", name="foo"), 1) == ["m1"]
    got = bar.receive(timeout=10)
    bar.accept()
    assert got.body == "m1" and got.annotations["x-opt-ORIG-ADDRESS"] == "MY.QUEUE"
    assert nothing_more(conn.create_receiver("MY.QUEUE", name="own"))
    conn.close()


def test_wire_tap_composite_keeps_its_own_copy(start_broker):
    b = start_broker(config=COMPOSITES)
    conn = connect(b.url)
    send(conn, "IncomingOrders", "order-1")
    assert receive_bodies(conn.create_receiver("IncomingOrders", name="own"), 1) == ["order-1"]
    assert receive_bodies(conn.create_receiver("Tap", name="tap"), 1) == ["order-1"]
    conn.close()


def test_filtered_destinations(start_broker):
    b = start_broker(config=COMPOSITES)
    conn = connect(b.url)
    send(conn, "Filtered",
         Message(body="odd5", properties={"odd": "yes", "i": 5}),
         Message(body="odd1", properties={"odd": "yes", "i": 1}),
         Message(body="even2", properties={"odd": "no", "i": 2}))
    assert receive_bodies(conn.create_receiver("ODD", name="odd"), 2) == ["odd5", "odd1"]
    assert receive_bodies(conn.create_receiver("FIVE", name="five"), 1) == ["odd5"]
    own = conn.create_receiver("Filtered", name="own")
    assert receive_bodies(own, 1) == ["even2"]  # matched nothing: kept (send_when_not_matched)
    assert nothing_more(own)
    conn.close()


DIVERTS = """
[[divert]]
name = "prices-divert"
address = "priceUpdates"
forwarding_address = "priceForwarding"
filter = "office = 'New York'"
exclusive = true

[[divert]]
name = "order-divert"
address = "orders"
forwarding_address = "spyTopic"
routing_type = "multicast"
"""


def test_exclusive_prices_divert_with_filter(start_broker):
    b = start_broker(config=DIVERTS)
    conn = connect(b.url)
    send(conn, "priceUpdates", Message(body="ny", properties={"office": "New York"}),
         Message(body="ldn", properties={"office": "London"}))
    assert receive_bodies(conn.create_receiver("priceUpdates", name="own"), 1) == ["ldn"]
    fwd = conn.create_receiver("priceForwarding", name="fwd")
    m = fwd.receive(timeout=10)
    fwd.accept()
    assert m.body == "ny"
    assert m.annotations["x-opt-ORIG-ADDRESS"] == "priceUpdates"
    assert m.annotations["x-opt-ORIG-QUEUE"] == "prices-divert"
    assert nothing_more(fwd)
    conn.close()


def test_non_exclusive_order_divert_to_spy_topic(start_broker):
    b = start_broker(config=DIVERTS)
    conn = connect(b.url)
    spy = conn.create_receiver("spyTopic", name="spy", options=[topic()])
    send(conn, "orders", "o1")
    assert receive_bodies(spy, 1) == ["o1"]
    assert receive_bodies(conn.create_receiver("orders", name="own"), 1) == ["o1"]
    conn.close()


@pytest.mark.parametrize("routing_type, via, reaches", [
    ("anycast", "topic://", {"any"}), ("multicast", "queue://", {"sub"}),
    ("strip", "queue://", {"any", "sub"}), ("pass", "queue://", {"any"}), ("pass", "topic://", {"sub"}),
])
def test_divert_routing_types(start_broker, routing_type, via, reaches):
    b = start_broker(config=f"""
[[address]]
name = "src"
routing = ["anycast", "multicast"]
  [[address.queue]]
  name = "src"
  routing = "anycast"

[[address]]
name = "dst"
routing = ["anycast", "multicast"]
  [[address.queue]]
  name = "any"
  routing = "anycast"
  [[address.queue]]
  name = "sub"
  routing = "multicast"

[[divert]]
name = "d"
address = "src"
forwarding_address = "dst"
routing_type = "{routing_type}"
exclusive = true
""")
    conn = connect(b.url)
    send(conn, via + "src", "m")
    got = set()
    for q in ("any", "sub"):
        r = conn.create_receiver(f"dst::{q}", name=q)
        if not nothing_more(r, timeout=0.5):
            got.add(q)
    assert got == reaches
    conn.close()


def test_config_cycle_is_a_startup_error_naming_the_ring(tmp_path):
    cfg = tmp_path / "cycle.toml"
    cfg.write_text("""
[[divert]]
name = "there"
address = "a"
forwarding_address = "b"

[[divert]]
name = "back"
address = "b"
forwarding_address = "a"
""")
    r = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--config", str(cfg), "--store", "memory",
                        "--port", "0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()
    assert len(line) == 1 and "cycle" in line[0] and "there" in line[0] and "back" in line[0]


def test_transformer_is_applied_to_the_divert_copy(start_broker, tmp_path):
    (tmp_path / "shout.py").write_text(
        "def upper(message):\n    message.body = message.body.upper()\n    return message\n")
    b = start_broker(config="""
[[divert]]
name = "loud"
address = "quiet"
forwarding_address = "loud"
transformer = "shout:upper"
""")
    conn = connect(b.url)
    send(conn, "quiet", "hello")
    assert receive_bodies(conn.create_receiver("loud", name="l"), 1) == ["HELLO"]
    assert receive_bodies(conn.create_receiver("quiet", name="q"), 1) == ["hello"]
    conn.close()


@pytest.mark.parametrize("pattern", ["news.#", "news.>", "news.*"])
def test_wildcard_subscription(broker, pattern):
    conn = connect(broker.url)
    sub = conn.create_receiver(pattern, name="w", options=[topic()])
    for address in ("news.eu", "news.us", "weather.eu"):
        send(conn, "topic://" + address, address)
    got = receive_bodies(sub, 2)
    assert got == ["news.eu", "news.us"]
    assert nothing_more(sub)
    conn.close()


def test_client_side_composite_target_sends_one_copy_to_each_part(broker):
    conn = connect(broker.url)
    c = conn.create_receiver("c", name="c", options=[topic()])
    send(conn, "a, b,topic://c", "m")
    assert receive_bodies(conn.create_receiver("a", name="a"), 1) == ["m"]
    assert receive_bodies(conn.create_receiver("b", name="b"), 1) == ["m"]
    assert receive_bodies(c, 1) == ["m"]
    conn.close()


def test_client_side_composite_source_consumes_from_every_part(broker):
    conn = connect(broker.url)
    send(conn, "p1", "from p1")
    send(conn, "p2", "from p2")
    r = conn.create_receiver("p1,p2", name="both", credit=10)
    assert sorted(receive_bodies(r, 2)) == ["from p1", "from p2"]
    conn.close()


def test_divert_filter_with_selector_on_copy_annotations(start_broker):
    b = start_broker(config=DIVERTS)
    conn = connect(b.url)
    spy = conn.create_receiver("spyTopic", name="spy",
                               options=[topic(), Selector("\"m.x-opt-ORIG-ADDRESS\" = 'orders'")])
    send(conn, "orders", "o2")
    assert receive_bodies(spy, 1) == ["o2"]
    conn.close()
