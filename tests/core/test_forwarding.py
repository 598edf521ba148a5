"""Diverts, composites, wildcard subscriptions and virtual topics in the pure core."""
from __future__ import annotations

import pytest

from hermod.broker.core import links
from hermod.broker.core.forwarding import Divert, Target, find_cycles
from hermod.broker.core.message import ANYCAST, MULTICAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.virtual_topics import VirtualTopic
from hermod.broker.core.wildcards import matches

from test_routing import Envelope, Sink, bodies


class Copy(Message):
    """A forwarded copy as the core sees it; records the annotations the codec would write."""

    __slots__ = ("annotations_added",)


def annotate_copy(message, extra, address, clear_expiry=False):
    copy = Copy(message.encoded, message.envelope, address, None, message.container_id, message.arrival)
    copy.annotations_added = extra
    return copy


@pytest.fixture
def po():
    return PostOffice(annotate=annotate_copy, compile_filter=lambda text: (lambda m: text in m.encoded.decode()))


def queue_bodies(po, name):
    return [r.message.encoded.decode() for r in po.queues[name].waiting()]


def send(po, address, body, rt=None):
    m = Message(body.encode(), Envelope(), address, rt)
    po.post(po.route(m, address, rt))
    return m


def divert(name, source, targets, exclusive=False, rt="strip", filt=None):
    return Divert(name=name, source=source, targets=[Target(t, rt) for t in targets],
                     exclusive=exclusive, filter=filt)


def test_non_exclusive_divert_copies_and_the_address_keeps_the_original(po):
    po.create_queue("orders", "orders", ANYCAST)
    po.create_queue("spy", "spyTopic", MULTICAST)
    po.add_divert(divert("order-divert", "orders", ["spyTopic"]))
    send(po, "orders", "o1")
    assert queue_bodies(po, "orders") == ["o1"]
    assert queue_bodies(po, "spy") == ["o1"]
    copy = po.queues["spy"].waiting()[0].message
    original = po.queues["orders"].waiting()[0].message
    assert copy is not original and copy.id != original.id
    assert copy.annotations_added["x-opt-ORIG-ADDRESS"] == "orders"
    assert copy.annotations_added["x-opt-ORIG-QUEUE"] == "order-divert"
    assert copy.annotations_added["x-opt-ORIG-MESSAGE-ID"] == original.id


def test_exclusive_divert_with_filter_takes_only_matching_messages(po):
    po.create_queue("priceUpdates", "priceUpdates", ANYCAST)
    po.create_queue("priceForwarding", "priceForwarding", ANYCAST)
    po.add_divert(divert("prices-divert", "priceUpdates", ["priceForwarding"], exclusive=True,
                            filt=lambda m: b"New York" in m.encoded))
    send(po, "priceUpdates", "London 1")
    send(po, "priceUpdates", "New York 2")
    assert queue_bodies(po, "priceUpdates") == ["London 1"]
    assert queue_bodies(po, "priceForwarding") == ["New York 2"]


def test_every_matching_exclusive_divert_fires_and_non_exclusive_ones_do_not(po):
    for q in ("src", "x1", "x2", "n1"):
        po.create_queue(q, q, ANYCAST)
    po.add_divert(divert("e1", "src", ["x1"], exclusive=True))
    po.add_divert(divert("e2", "src", ["x2"], exclusive=True))
    po.add_divert(divert("n", "src", ["n1"]))
    send(po, "src", "m")
    assert [queue_bodies(po, q) for q in ("src", "x1", "x2", "n1")] == [[], ["m"], ["m"], []]


@pytest.mark.parametrize("rewrite, sent_rt, copy_rt", [
    ("anycast", MULTICAST, ANYCAST), ("multicast", ANYCAST, MULTICAST),
    ("pass", ANYCAST, ANYCAST), ("pass", MULTICAST, MULTICAST), ("strip", ANYCAST, None),
])
def test_divert_routing_type_rewrite(po, rewrite, sent_rt, copy_rt):
    po.create_queue("in", "in", ANYCAST)
    po.create_address("in", {MULTICAST})
    po.create_queue("out.any", "out", ANYCAST)
    po.create_queue("out.multi", "out", MULTICAST)
    po.add_divert(divert("d", "in", ["out"], rt=rewrite))
    send(po, "in", "m", rt=sent_rt)
    got = {q: queue_bodies(po, q) for q in ("out.any", "out.multi")}
    expected = {"out.any": ["m"] if copy_rt in (ANYCAST, None) else [],
                "out.multi": ["m"] if copy_rt in (MULTICAST, None) else []}
    assert got == expected


def test_comma_separated_forwarding_addresses(po):
    for q in ("a", "b", "c"):
        po.create_queue(q, q, ANYCAST)
    po.add_divert(divert("fan", "a", ["b", "c"]))
    send(po, "a", "m")
    assert (queue_bodies(po, "b"), queue_bodies(po, "c")) == (["m"], ["m"])


def test_wildcard_divert_source_applies_to_existing_and_future_addresses(po):
    po.create_queue("audit", "audit", ANYCAST)
    po.create_queue("prices.eu", "prices.eu", ANYCAST)
    po.add_divert(divert("audit-all", "prices.#", ["audit"]))
    po.create_queue("prices.us", "prices.us", ANYCAST)
    send(po, "prices.eu", "eu")
    send(po, "prices.us", "us")
    assert queue_bodies(po, "audit") == ["eu", "us"]


def test_runtime_cycle_is_cut_after_16_hops_and_dead_lettered(po):
    po.create_queue("ring.a", "ring.a", ANYCAST)
    po.add_divert(divert("loop", "ring.#", ["ring.a"], exclusive=True))
    send(po, "ring.a", "spin")
    assert queue_bodies(po, "DLQ") == ["spin"]
    assert queue_bodies(po, "ring.a") == []


def test_a_copy_back_into_an_address_on_its_way_is_dead_lettered_at_once(po):
    # A non-exclusive ring: each address keeps what it gets, the copy that would close the ring
    # goes to the dead-letter address (not sixteen laps of copies onto the ring's queues).
    po.create_queue("ring.a", "ring.a", ANYCAST)
    po.create_queue("ring.b", "ring.b", ANYCAST)
    po.add_divert(divert("a-to-b", "ring.a", ["ring.b"]))
    po.add_divert(divert("b-to-a", "ring.b", ["ring.a"]))
    send(po, "ring.a", "lap")
    assert [queue_bodies(po, q) for q in ("ring.a", "ring.b", "DLQ")] == [["lap"], ["lap"], ["lap"]]
    assert po.queues["DLQ"].waiting()[0].message.annotations_added["x-opt-ORIG-QUEUE"] == "b-to-a"


def test_two_diverts_reaching_one_address_by_different_ways_each_deliver_a_copy(po):
    for q in ("top", "left", "right", "bottom"):
        po.create_queue(q, q, ANYCAST)
    po.add_divert(divert("split", "top", ["left", "right"]))
    po.add_divert(divert("left-down", "left", ["bottom"]))
    po.add_divert(divert("right-down", "right", ["bottom"]))
    send(po, "top", "m")
    assert queue_bodies(po, "bottom") == ["m", "m"]
    assert "DLQ" not in po.queues


def test_config_cycles_are_found():
    a = divert("a", "x", ["y"])
    b = divert("b", "y", ["x"])
    c = divert("c", "z", ["z"])
    d = divert("d", "w", ["x"])
    rings = find_cycles([a, b, c, d], matches)
    assert sorted(sorted(r) for r in rings) == [["a", "b"], ["c"]]


def composite(name, entries, kind="queue", forward_only=True, send_when_not_matched=False):
    return Divert(name=name, source=name, kind="composite", exclusive=True, targets=entries,
                     forward_only=forward_only, send_when_not_matched=send_when_not_matched,
                     applies_to=ANYCAST if kind == "queue" else MULTICAST)


def test_composite_queue_forwards_to_queue_and_topic_and_keeps_nothing(po):
    po.create_queue("FOO", "FOO", ANYCAST)
    po.create_queue("BAR.sub", "BAR", MULTICAST)
    po.create_queue("MY.QUEUE", "MY.QUEUE", ANYCAST)
    po.add_divert(composite("MY.QUEUE", [Target("FOO", ANYCAST), Target("BAR", MULTICAST)]))
    send(po, "MY.QUEUE", "m", rt=ANYCAST)
    assert (queue_bodies(po, "FOO"), queue_bodies(po, "BAR.sub"), queue_bodies(po, "MY.QUEUE")) == (["m"], ["m"], [])


def test_composite_wire_tap_keeps_a_copy_with_forward_only_false(po):
    po.create_queue("IncomingOrders", "IncomingOrders", ANYCAST)
    po.create_queue("Tap", "Tap", ANYCAST)
    po.add_divert(composite("IncomingOrders", [Target("Tap", ANYCAST)], forward_only=False))
    send(po, "IncomingOrders", "m", rt=ANYCAST)
    assert (queue_bodies(po, "IncomingOrders"), queue_bodies(po, "Tap")) == (["m"], ["m"])


def test_composite_filtered_destinations_and_send_when_not_matched(po):
    po.create_queue("C", "C", ANYCAST)
    po.create_queue("ODD", "ODD", ANYCAST)
    po.create_queue("FIVE", "FIVE", ANYCAST)
    po.add_divert(composite("C", [Target("ODD", ANYCAST, lambda m: b"odd" in m.encoded),
                                     Target("FIVE", ANYCAST, lambda m: b"i=5" in m.encoded)],
                               send_when_not_matched=True))
    for body in ("odd i=5", "odd i=1", "even i=2"):
        send(po, "C", body, rt=ANYCAST)
    assert queue_bodies(po, "ODD") == ["odd i=5", "odd i=1"]
    assert queue_bodies(po, "FIVE") == ["odd i=5"]
    assert queue_bodies(po, "C") == ["even i=2"]  # matched nothing: kept on the composite itself


def test_wildcard_subscription_receives_from_existing_and_future_addresses(po):
    po.create_address("news.eu", {MULTICAST})
    sink = Sink()
    c = links.attach_consumer(po, links.ConsumerRequest("news.#", MULTICAST), sink)
    c.credit = 10
    po.create_address("news.us.sport", {MULTICAST})
    for address in ("news.eu", "news.us.sport", "news", "weather"):
        po.create_address(address, {MULTICAST})
        send(po, address, address, rt=MULTICAST)
    send(po, "news.eu", "anycast-routed", rt=ANYCAST)
    po.run_dispatch()
    assert bodies(sink) == ["news.eu", "news.us.sport", "news"]


def test_virtual_topic_groups_each_get_every_message_once(po):
    vt = VirtualTopic()
    sinks = {}
    for group, n in (("A", 2), ("B", 1)):
        for i in range(n):
            sink = Sink()
            c = links.attach_virtual_topic_consumer(
                po, vt, "VirtualTopic.Orders",
                links.ConsumerRequest(f"Consumer.{group}.VirtualTopic.Orders"), sink)
            c.credit = 10
            sinks[f"{group}{i}"] = sink
    for i in range(4):
        send(po, "VirtualTopic.Orders", str(i), rt=MULTICAST)
    po.run_dispatch()
    assert sorted(bodies(sinks["A0"]) + bodies(sinks["A1"])) == ["0", "1", "2", "3"]
    assert bodies(sinks["A0"]) and bodies(sinks["A1"])  # load-balanced within the group
    assert bodies(sinks["B0"]) == ["0", "1", "2", "3"]
    q = po.queues["Consumer.A.VirtualTopic.Orders"]
    assert q.durable and q.address.name == "VirtualTopic.Orders" and not q.auto_created


def test_selector_aware_virtual_topic_queue_takes_only_what_a_consumer_selects(po):
    vt = VirtualTopic(selector_aware=True)
    sink = Sink()
    req = links.ConsumerRequest("Consumer.A.VirtualTopic.Prices", selector="EU",
                                selector_predicate=lambda m: b"EU" in m.encoded)
    c = links.attach_virtual_topic_consumer(po, vt, "VirtualTopic.Prices", req, sink)
    c.credit = 10
    for body in ("EU 1", "US 2"):
        send(po, "VirtualTopic.Prices", body, rt=MULTICAST)
    po.run_dispatch()
    assert bodies(sink) == ["EU 1"]
    assert po.queues["Consumer.A.VirtualTopic.Prices"].added == 1
    links.detach_consumer(po, c)
    send(po, "VirtualTopic.Prices", "EU 3", rt=MULTICAST)
    assert po.queues["Consumer.A.VirtualTopic.Prices"].added == 1  # no consumer: nothing kept


def test_selector_cache_keeps_collecting_while_consumers_are_away(po):
    vt = VirtualTopic(selector_aware=True, selector_cache=True)
    req = links.ConsumerRequest("Consumer.A.VirtualTopic.Q", selector="EU",
                                selector_predicate=lambda m: b"EU" in m.encoded)
    c = links.attach_virtual_topic_consumer(po, vt, "VirtualTopic.Q", req, Sink())
    links.detach_consumer(po, c)
    for body in ("EU 1", "US 2"):
        send(po, "VirtualTopic.Q", body, rt=MULTICAST)
    assert queue_bodies(po, "Consumer.A.VirtualTopic.Q") == ["EU 1"]
    assert po.queues["Consumer.A.VirtualTopic.Q"].extra["selectors"] == ["EU"]


@pytest.mark.parametrize("name, topic", [
    ("Consumer.A.VirtualTopic.Orders", "VirtualTopic.Orders"),
    ("Consumer.group-1.VirtualTopic.a.b", "VirtualTopic.a.b"),
    ("Consumer.A.Orders", None), ("VirtualTopic.Orders", None), ("Consumer.VirtualTopic.X", None),
])
def test_virtual_topic_consumer_queue_names(name, topic):
    assert VirtualTopic().topic_of(name) == topic


def test_a_shared_body_copy_sets_every_field_a_message_has():
    """SharedBodyCopy sets Message's fields itself (no super() call, for speed): a field added
    to Message and not there would be an AttributeError on the first copy that reads it."""
    from hermod.broker.core.message import SharedBodyCopy

    copy = SharedBodyCopy(b"head", b"..bare", 2, None, "target", "container", 7)
    for name in Message.__slots__:
        assert hasattr(copy, name), name
    assert (copy.encoded, copy.size, copy.arrival, copy.hops, copy.id) == (b"headbare", 8, 7, 0, 0)


def test_a_divert_copy_of_a_delayed_message_is_due_when_the_original_is(po):
    """A copy keeps the original's x-opt-delivery-delay and arrival, so it waits as long
    (copies.divert_copy takes the original's scheduled time rather than reading it again)."""
    po.create_queue("orders", "orders", ANYCAST)
    po.create_queue("spy", "spyTopic", MULTICAST)
    po.add_divert(divert("order-divert", "orders", ["spyTopic"]))
    envelope = Envelope()
    envelope.annotations = {"x-opt-delivery-delay": 60_000}
    arrival = po.clock.now_ms()
    po.post(po.route(Message(b"later", envelope, "orders", None, None, arrival), "orders", None))
    assert queue_bodies(po, "orders") == queue_bodies(po, "spy") == ["later"]
    assert len(po.queues["orders"].backlog) == len(po.queues["spy"].backlog) == 0  # both wait
    assert po.queues["spy"].scheduled.next_due() == po.queues["orders"].scheduled.next_due() == arrival + 60_000
