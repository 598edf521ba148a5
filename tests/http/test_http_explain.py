"""GET /api/explain: the route a message would take, step by step, with nothing sent or made."""
from __future__ import annotations

import json
from urllib.parse import quote

from proton import Message
from proton.utils import BlockingConnection

from hermod_testing import wait_for
from http_helpers import TIMEOUT, call, http_url, send

CONFIG = """
[[address]]
name = "prices"
routing = ["multicast"]
  [[address.queue]]
  name = "all-prices"
  routing = "multicast"
  [[address.queue]]
  name = "ny-only"
  routing = "multicast"
  filter = "office = 'NY'"

[[divert]]
name = "ny-divert"
address = "prices"
forwarding_address = "ny-archive"
filter = "office = 'NY'"
exclusive = false
"""


def test_explain_names_the_divert_and_the_filters_passed(start_broker):
    b = start_broker(config=CONFIG)
    base = http_url(b)
    props = quote(json.dumps({"office": "NY"}))
    status, route = call(base, "GET", f"/api/explain?address=prices&properties={props}")
    assert status == 200
    kinds = [(s["kind"], s["name"], s["passed"]) for s in route["steps"]]
    assert ("divert", "ny-divert", True) in kinds
    assert ("queue", "ny-only", True) in kinds and ("queue", "all-prices", True) in kinds
    assert set(route["queues"]) == {"all-prices", "ny-only", "ny-archive"}
    assert route["created"] is False
    status, route = call(base, "GET", "/api/explain?address=prices&properties=" + quote('{"office": "LDN"}'))
    kinds = [(s["kind"], s["name"], s["passed"]) for s in route["steps"]]
    assert ("divert", "ny-divert", False) in kinds and ("queue", "ny-only", False) in kinds
    assert route["queues"] == ["all-prices"]
    # nothing was created by asking
    status, route = call(base, "GET", "/api/explain?address=brand-new")
    assert route["created"] is True and route["queues"] == ["brand-new"]
    assert call(base, "GET", "/api/queues/brand-new")[0] == 404
    assert call(base, "GET", "/api/explain?address=prices&properties=notjson")[0] == 400


# explain is the post office's routing run as a dry run: for each way a message can go (a fully
# qualified queue, a non-exclusive and an exclusive divert with a filter, a composite, a virtual
# topic), its answer names the queues a real send then fills, and nothing more; its steps name
# each divert and the divert's filter. (A cycle: tests/core/test_explain_dry_run.py, since the
# configuration refuses a forwarding cycle.)

ROUTES = """
[[address]]
name = "orders"
routing = ["anycast"]
  [[address.queue]]
  name = "orders"
  routing = "anycast"
  [[address.queue]]
  name = "orders-audit"
  routing = "anycast"

[[divert]]
name = "urgent-only"
address = "orders"
forwarding_address = "urgent"
filter = "urgent = 'yes'"
exclusive = true

[[composite]]
name = "incoming"
kind = "queue"
forward_only = true
send_when_not_matched = true
  [[composite.forward]]
  queue = "big-orders"
  selector = "size > 100"
  [[composite.forward]]
  topic = "order-events"
"""


def _counts(base: str) -> dict[str, int]:
    status, queues = call(base, "GET", "/api/queues")
    assert status == 200
    return {q["name"]: q["messages"] for q in queues}


def _explain(base: str, address: str, properties: dict, routing_type: str | None = None) -> dict:
    path = f"/api/explain?address={quote(address, safe='')}&properties={quote(json.dumps(properties))}"
    if routing_type:
        path += f"&routing_type={routing_type}"
    status, route = call(base, "GET", path)
    assert status == 200, route
    return route


def _really(broker, base: str, address: str, properties: dict) -> set[str]:
    """Send a message as a client would and return the queues that gained one."""
    before = _counts(base)
    send(broker.url, address, Message(body="x", properties=properties))
    grown: set[str] = set()

    def settled() -> bool:
        after = _counts(base)
        grown.clear()
        grown.update(n for n, c in after.items() if c > before.get(n, 0))
        return bool(grown)
    wait_for(settled, timeout=TIMEOUT, message="the send reached a queue")
    return grown


def _same(broker, base: str, address: str, properties: dict) -> dict:
    route = _explain(base, address, properties)
    assert set(route["queues"]) == _really(broker, base, address, properties), route
    return route


def test_explain_names_exactly_the_queues_a_send_reaches(start_broker):
    b = start_broker(config=CONFIG + ROUTES)
    base = http_url(b)
    # a non-exclusive divert with a filter: the copy and the original's queues
    route = _same(b, base, "prices", {"office": "NY"})
    [step] = [s for s in route["steps"] if s["name"] == "ny-divert"]
    assert step["passed"] is True and step["filter"] == "office = 'NY'" and step["to"] == ["ny-archive"]
    route = _same(b, base, "prices", {"office": "LDN"})
    assert route["queues"] == ["all-prices"]
    assert [s for s in route["steps"] if s["name"] == "ny-divert"][0]["passed"] is False
    # an exclusive divert with a filter: the original's queues only when it does not fire
    route = _same(b, base, "orders", {"urgent": "yes"})
    assert route["queues"] == ["urgent"]
    [step] = [s for s in route["steps"] if s["name"] == "urgent-only"]
    assert step["exclusive"] is True and step["filter"] == "urgent = 'yes'"
    assert any(s["kind"] == "original" and s["passed"] is False for s in route["steps"])
    # the anycast pick explain names is the one the send takes, turn after turn
    picked = [_same(b, base, "orders", {"urgent": "no"})["queues"] for _ in range(3)]
    assert picked[0] != picked[1] and picked[0] == picked[2]
    # a composite with a selector on one forward; the other a topic (nobody subscribed)
    route = _same(b, base, "incoming", {"size": 500})
    assert route["queues"] == ["big-orders"]
    [composite] = [s for s in route["steps"] if s["kind"] == "composite"]
    assert composite["to"] == ["big-orders", "order-events"] and composite["selectors"] == {"big-orders": "size > 100"}
    route = _explain(base, "incoming", {"size": 5})
    assert [s["to"] for s in route["steps"] if s["kind"] == "composite"] == [["order-events"]]


def test_explain_of_a_fully_qualified_queue_and_a_virtual_topic(start_broker):
    b = start_broker(config=CONFIG + ROUTES)
    base = http_url(b)
    route = _same(b, base, "orders::orders-audit", {})
    assert route["queues"] == ["orders-audit"] and route["address"] == "orders::orders-audit"
    # the queue named alone, never the address's other queue nor the exclusive divert
    assert not any(s["kind"] == "divert" for s in route["steps"])
    status, route = call(base, "GET", "/api/explain?address=" + quote("orders::nope", safe=""))
    assert status == 200 and route["queues"] == [] and route["steps"][0]["passed"] is False
    # a virtual topic: each consumer group's queue gets a copy
    conn = BlockingConnection(b.url, timeout=TIMEOUT)
    try:
        conn.create_receiver("Consumer.A.VirtualTopic.Orders", name="a").close()
        conn.create_receiver("Consumer.B.VirtualTopic.Orders", name="b").close()
    finally:
        conn.close()
    route = _same(b, base, "VirtualTopic.Orders", {})
    assert set(route["queues"]) == {"Consumer.A.VirtualTopic.Orders", "Consumer.B.VirtualTopic.Orders"}
    assert any(s["kind"] == "virtual-topic" for s in route["steps"])


def test_explain_creates_nothing_and_moves_no_turn(start_broker):
    b = start_broker(config=CONFIG + ROUTES)
    base = http_url(b)
    before = [_explain(base, "orders", {"urgent": "no"})["queues"] for _ in range(3)]
    assert before[0] == before[1] == before[2]  # asking three times: the same pick
    assert call(base, "GET", "/api/explain?address=brand-new")[1]["queues"] == ["brand-new"]
    assert call(base, "GET", "/api/queues/brand-new")[0] == 404
    assert call(base, "GET", "/api/queues/urgent")[0] == 404
