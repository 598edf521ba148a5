"""The HTTP API with users in [security]: HTTP Basic credentials of a user whose roles may
`manage` (reads: `browse` is enough); no credentials 401, wrong ones 401, too few rights 403;
/health always open."""
from __future__ import annotations

import base64

import pytest

from hermod.broker.security.passwords import hash_password
from http_helpers import call, http_url

PW = {"admin": "admin-secret", "reader": "reader-secret", "nobody": "nobody-secret"}
ROLES = {"admin": "admin", "reader": "viewer", "nobody": "guest"}
CONFIG = "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\n'
    f'roles = ["{ROLES[n]}"]\n' for n in PW) + """
[[security.permission]]
match = "#"
send = ["admin"]
consume = ["admin"]
browse = ["admin", "viewer"]
create_address = ["admin"]
manage = ["admin"]
"""


def basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def secured(start_broker):
    return start_broker(config=CONFIG)


def test_health_needs_no_credentials(secured):
    assert call(http_url(secured), "GET", "/health") == (200, {"status": "ok"})


def test_no_credentials_is_401_and_wrong_ones_are_refused(secured):
    base = http_url(secured)
    assert call(base, "GET", "/api/queues")[0] == 401
    assert call(base, "GET", "/metrics")[0] == 401
    assert call(base, "GET", "/api/queues", headers=basic("admin", "wrong"))[0] in (401, 403)
    assert call(base, "GET", "/api/queues", headers=basic("ghost", "x"))[0] in (401, 403)
    assert call(base, "POST", "/api/addresses", {"name": "x", "routing_types": ["anycast"]},
                headers=basic("admin", "wrong"))[0] in (401, 403)
    assert call(base, "GET", "/api/addresses", headers=basic("admin", PW["admin"]))[1] is not None
    names = [a["name"] for a in call(base, "GET", "/api/addresses", headers=basic("admin", PW["admin"]))[1]]
    assert "x" not in names  # the refused create made nothing


def test_browse_reads_but_only_manage_writes(secured):
    base = http_url(secured)
    reader, admin, nobody = (basic(n, PW[n]) for n in ("reader", "admin", "nobody"))
    assert call(base, "GET", "/api/queues", headers=reader)[0] == 200
    assert call(base, "GET", "/metrics", headers=reader)[0] == 200
    status, answer = call(base, "POST", "/api/addresses", {"name": "made", "routing_types": ["anycast"]},
                          headers=reader)
    assert status == 403 and "manage" in answer["error"]
    assert call(base, "GET", "/api/queues", headers=nobody)[0] == 403
    assert call(base, "POST", "/api/addresses", {"name": "made", "routing_types": ["anycast"]},
                headers=admin)[0] == 201
    names = [a["name"] for a in call(base, "GET", "/api/addresses", headers=reader)[1]]
    assert "made" in names
