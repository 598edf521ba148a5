"""A divert keeps where its target's copies went (`Target.reached`, `forwarding.route_through`) only while
nothing bound at the target changes: a target queue or address deleted and created again, with a
filter or without, while the divert stays, takes the next copy as a new send to it would."""
from __future__ import annotations

from hermod.broker.tools.clients import management_call
from wire_helpers import connect, nothing_more, receive_bodies, send

CONFIG = """
[[address]]
name = "src"
routing = ["anycast"]
  [[address.queue]]
  name = "src"
  routing = "anycast"

[[address]]
name = "dst"
routing = ["anycast"]
  [[address.queue]]
  name = "dst"
  routing = "anycast"

[[divert]]
name = "d"
address = "src"
forwarding_address = "dst"
"""


def _drained(conn, address: str, n: int) -> list:
    r = conn.create_receiver(address, name=f"drain-{address}-{n}")
    bodies = receive_bodies(r, n)
    assert nothing_more(r)
    r.close()
    return bodies


def _sent_before_change(conn) -> None:
    """Two copies through the divert: the second goes where the first went, kept."""
    send(conn, "src", ["a1", "a2"])
    assert _drained(conn, "dst", 2) == ["a1", "a2"]


def test_target_address_recreated_with_a_filtered_queue_gets_only_what_the_filter_takes(start_broker):
    b = start_broker(config=CONFIG)
    conn = connect(b.url)
    _sent_before_change(conn)
    management_call(b.url, "queue.delete", args={"name": "dst"})
    management_call(b.url, "address.delete", args={"name": "dst"})
    management_call(b.url, "address.create", args={"name": "dst", "routing_types": ["anycast"]})
    management_call(b.url, "queue.create", args={"name": "dst", "address": "dst", "routing_type": "anycast",
                                                 "durable": False, "filter": "color = 'red'"})
    send(conn, "src", ["blue"], properties={"color": "blue"})
    send(conn, "src", ["red"], properties={"color": "red"})
    assert _drained(conn, "dst", 1) == ["red"]
    assert _drained(conn, "src", 4) == ["a1", "a2", "blue", "red"]
    conn.close()


def test_target_queue_recreated_with_a_filter_on_the_same_address(start_broker):
    b = start_broker(config=CONFIG)
    conn = connect(b.url)
    _sent_before_change(conn)
    management_call(b.url, "queue.delete", args={"name": "dst"})
    management_call(b.url, "queue.create", args={"name": "dst", "address": "dst", "routing_type": "anycast",
                                                 "durable": False, "filter": "color = 'red'"})
    send(conn, "src", ["blue"], properties={"color": "blue"})
    send(conn, "src", ["red"], properties={"color": "red"})
    assert _drained(conn, "dst", 1) == ["red"]
    conn.close()


def test_a_second_queue_on_the_target_takes_its_turn(start_broker):
    b = start_broker(config=CONFIG)
    conn = connect(b.url)
    _sent_before_change(conn)
    management_call(b.url, "queue.create", args={"name": "dst2", "address": "dst", "routing_type": "anycast",
                                                 "durable": False})
    send(conn, "src", ["c1", "c2"])
    got = {q: _drained(conn, f"dst::{q}", 1) for q in ("dst", "dst2")}
    assert sorted(got["dst"] + got["dst2"]) == ["c1", "c2"]
    conn.close()


def test_target_queue_deleted_is_auto_created_again_for_the_next_copy(start_broker):
    b = start_broker(config=CONFIG)
    conn = connect(b.url)
    _sent_before_change(conn)
    management_call(b.url, "queue.delete", args={"name": "dst"})
    send(conn, "src", ["after"])
    assert "dst" in {r["queue"] for r in management_call(b.url, "queue.stat")}
    assert _drained(conn, "dst", 1) == ["after"]
    conn.close()
