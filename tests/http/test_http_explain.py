"""GET /api/explain: the route a message would take, step by step, with nothing sent or made."""
from __future__ import annotations

import json
from urllib.parse import quote

from http_helpers import call, http_url

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
