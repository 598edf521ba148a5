"""Management lists narrowed per user (issue 15, item 1 leftovers): a user whose roles may
`browse` only some addresses sees only those addresses and their queues in list operations, and
cannot read another queue's details or messages (403). The administrator sees what its
entries let it browse: everything here, since `team.#` (more specific than `#`, and so deciding
alone) names it too. Real broker, real HTTP."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from urllib.parse import quote

import pytest

from hermod.broker.security.passwords import hash_password
from ops_support import http_base

PW = {"ops": "ops-secret", "root": "root-secret"}
ROLES = {"ops": "team", "root": "admin"}
CONFIG = "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\n'
    f'roles = ["{ROLES[n]}"]\n' for n in PW) + """
[[security.permission]]
match = "#"
manage = ["admin"]
browse = ["admin"]

[[security.permission]]
match = "team.#"
browse = ["team", "admin"]

[[address]]
name = "team.orders"
  [[address.queue]]
  name = "team.orders"

[[address]]
name = "payroll"
  [[address.queue]]
  name = "payroll"
"""


def get(broker, path: str, user: str) -> tuple[int, object]:
    token = base64.b64encode(f"{user}:{PW[user]}".encode()).decode()
    req = urllib.request.Request(http_base(broker) + path, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def secured(start_broker):
    return start_broker(config=CONFIG)


def test_a_browse_only_user_lists_only_what_it_may_browse(secured):
    status, queues = get(secured, "/api/queues", "ops")
    assert status == 200 and [q["name"] for q in queues] == ["team.orders"]
    status, addresses = get(secured, "/api/addresses", "ops")
    assert status == 200 and [a["name"] for a in addresses] == ["team.orders"]


def test_a_browse_only_user_cannot_read_other_queues(secured):
    assert get(secured, "/api/queues/team.orders", "ops")[0] == 200
    assert get(secured, "/api/queues/team.orders/messages", "ops") == (200, [])
    status, answer = get(secured, "/api/queues/payroll", "ops")
    assert status == 403 and "payroll" in answer["error"]
    assert get(secured, "/api/queues/payroll/messages", "ops")[0] == 403
    assert get(secured, "/api/queues/" + quote("payroll::payroll", safe=""), "ops")[0] == 403


def test_the_administrator_sees_everything(secured):
    names = {q["name"] for q in get(secured, "/api/queues", "root")[1]}
    assert {"team.orders", "payroll"} <= names
    assert get(secured, "/api/queues/payroll", "root")[0] == 200


def test_the_console_page_and_the_overview_are_narrowed_too(secured):
    status, page = get(secured, "/api/queues?search=r&limit=10", "ops")
    assert status == 200 and [q["name"] for q in page] == ["team.orders"]
    status, overview = get(secured, "/api/overview", "ops")
    assert status == 200 and (overview["queues"], overview["addresses"]) == (1, 1)
    assert get(secured, "/api/overview", "root")[1]["queues"] >= 2
