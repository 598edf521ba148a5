"""The operator's views and definitions (issue 33) are checked per address like every management
call, through both doors and the CLI: a tenant with `manage` on `tenantA.#` sees only her own
addresses in `status`, `divert.list`, `subscription.list` and `definitions.export`, is refused
(403, one line) `queue.show` and `definitions.import` anywhere else, and an import that names one
address of another tenant creates nothing at all."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from proton import Message
from proton.reactor import DurableSubscription

from hermod.broker.tools.clients import Capabilities, ManagementCallError, management_call
from http_helpers import call, http_url
from test_management_authz import CONFIG, PW, basic, login, q

ROUTES = {
    "status": ("GET", lambda a: "/api/status", None),
    "queue.show": ("GET", lambda a: f"/api/queues/{q(a['name'])}/details", None),
    "divert.list": ("GET", lambda a: "/api/diverts", None),
    "subscription.list": ("GET", lambda a: "/api/subscriptions", None),
    "definitions.export": ("GET", lambda a: "/api/definitions", None),
    "definitions.import": ("POST", lambda a: "/api/definitions", lambda a: a["definitions"]),
}


def door(broker, via: str, user: str):
    """(status, answer) of an operation as `user` through HTTP or AMQP management."""
    def http(operation: str, **args):
        method, path, body = ROUTES[operation]
        return call(http_url(broker), method, path(args), body(args) if body else None, headers=basic(user))

    def amqp(operation: str, **args):
        url = broker.url.replace("amqp://", f"amqp://{user}:{PW[user]}@")
        try:
            return 200, management_call(url, operation, args=args)
        except ManagementCallError as e:
            return e.status, str(e)
    return http if via == "http" else amqp


@pytest.fixture
def secured(start_broker):
    b = start_broker("--http-port", "0", config=CONFIG)
    conn = login(b, "admin", container_id="admin-client")
    try:
        conn.create_sender("secret.payroll").send(Message(body="salary"))
        conn.create_sender("tenantA.inbox").send(Message(body="mine"))
        for topic in ("tenantA.news", "secret.news"):
            conn.create_receiver(topic, name=f"{topic}-sub",
                                 options=[DurableSubscription(), Capabilities("topic")]).detach()
    finally:
        conn.close()
    return b


def refused(answer, address: str) -> None:
    status, body = answer
    assert status == 403, answer
    text = body["error"] if isinstance(body, dict) else str(body)
    assert address in text and len(text.splitlines()) == 1, text


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_a_tenant_sees_only_her_own_objects(secured, via):
    alice, admin = door(secured, via, "alice"), door(secured, via, "admin")

    status, s = alice("status")
    assert status == 200 and s["queues"] == 5 and s["messages"] == 1  # tenantA.inbox/other/dlq/tap + her subscription
    assert s["connections"] is None and s["listeners"] is None and s["memory"] is None
    status, s = admin("status")
    assert s["messages"] == 2 and s["connections"] is not None and s["listeners"]

    assert alice("divert.list") == (200, [])  # tap-divert writes into secret.archive
    assert [d["name"] for d in admin("divert.list")[1]] == ["tap-divert"]

    status, subs = alice("subscription.list")
    assert status == 200 and [s["address"] for s in subs] == ["tenantA.news"]
    assert {s["address"] for s in admin("subscription.list")[1]} == {"tenantA.news", "secret.news"}

    status, exported = alice("definitions.export")
    assert status == 200
    names = {a["name"] for a in exported["addresses"]} | {x["name"] for x in exported["queues"]}
    assert names and all(n.startswith("tenantA.") for n in names), names
    assert exported["diverts"] == [] and exported["address_settings"] == []
    assert "secret.payroll" in {x["name"] for x in admin("definitions.export")[1]["queues"]}

    watcher = login(secured, "admin", container_id="admin-watcher")
    try:
        watcher.create_receiver("tenantA.inbox", name="admin-link", credit=0)
        [mine] = alice("queue.show", name="tenantA.inbox")[1]["consumer_details"]
        [seen] = admin("queue.show", name="tenantA.inbox")[1]["consumer_details"]
    finally:
        watcher.close()
    # whose connection it is, like the connection list, only for a broker-wide reader
    assert mine["container_id"] is None and mine["remote"] is None and mine["user"] is None
    assert seen["container_id"] == "admin-watcher" and seen["user"] == "admin"
    assert alice("queue.show", name="tenantA.inbox")[1]["messages"] == 1
    refused(alice("queue.show", name="secret.payroll"), "secret.payroll")


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_an_import_naming_another_tenants_address_creates_nothing(secured, via):
    alice, admin = door(secured, via, "alice"), door(secured, via, "admin")
    document = {"addresses": [{"name": "tenantA.new", "routing_types": ["anycast"]}],
                "queues": [{"name": "tenantA.new", "address": "tenantA.new"},
                           {"name": "secret.planted", "address": "secret.planted"}]}
    refused(alice("definitions.import", definitions=document), "secret.planted")
    queues = {x["name"] for x in admin("definitions.export")[1]["queues"]}
    assert "tenantA.new" not in queues and "secret.planted" not in queues
    document["queues"].pop()
    status, result = alice("definitions.import", definitions=document)
    assert status == 200 and set(result["created"]) == {"address tenantA.new", "queue tenantA.new"}


def test_the_cli_refuses_a_tenant_with_one_line(secured, tmp_path):
    secret = tmp_path / "alice.pw"
    secret.write_text(PW["alice"] + "\n")
    who = ["--url", secured.url, "--user", "alice", "--password-file", str(secret)]

    def hermod(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hermod.broker", *args, *who], capture_output=True, text=True,
                              timeout=60)
    for args, address in ((("queue", "show", "secret.payroll"), "secret.payroll"),):
        r = hermod(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert address in r.stderr and "Traceback" not in r.stderr and PW["alice"] not in r.stderr
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({"queues": [{"name": "secret.planted"}]}))
    r = hermod("definitions", "import", str(planted))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "secret.planted" in r.stderr
    r = hermod("divert", "list")
    assert r.returncode == 0 and r.stdout.strip().splitlines() == [
        "name kind address forwarding_address exclusive routing_type fired filter"]
    r = hermod("status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["connections"] is None
