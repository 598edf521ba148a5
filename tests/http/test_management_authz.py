"""Management is checked per address, identically over HTTP and over AMQP (`hermod.management`),
as the contract's "Security" section says (issue 28, findings 1, 17 and 18):

- reading a queue (stat, peek) needs `browse` on its address; create, purge and delete need
  `manage` there (delete also `delete_queue`); move and retry need `manage` on the source and
  `send` on every address written to; sending a message needs `send`; address create/delete
  need `manage` on that address;
- broker-wide reads (`/api/connections`, `/metrics`) need `browse`, and closing a connection
  `manage`, from an entry whose `match` is `#`;
- lists and `explain` show only what the user may browse;
- `GET /api/connections` names the logged-in user and the protocol;
- the audit log records every management action with user, remote address, operation and
  arguments (no message bodies), HTTP logins, and `login_failed` on every door.

A tenant with `manage` on `tenantA.#` tries every operation on `secret.payroll` through each
door and is refused each time, with the secret queue's messages untouched; the same operations
on her own addresses succeed; the administrator (an entry with `match = "#"`) may do everything.
"""
from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from proton import Message
from proton.utils import BlockingConnection

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import ManagementCallError, management_call
from hermod_testing import wait_for
from http_helpers import call, http_url

PW = {"admin": "admin-pw-1", "alice": "alice-pw-2", "viewer": "viewer-pw-3", "bob": "bob-pw-4"}
ROLES = {"admin": "admin", "alice": "tenantA", "viewer": "viewer", "bob": "producer"}
ALL = ("send", "consume", "browse", "create_address", "create_durable_queue", "delete_queue", "manage")

CONFIG = "[security]\nanonymous = false\naudit_log = \"audit.jsonl\"\n" + "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\n'
    f'roles = ["{ROLES[n]}"]\n' for n in PW) + "".join(
    f'[[security.permission]]\nmatch = "{match}"\n' + "".join(f"{op} = {json.dumps(roles(op))}\n" for op in ALL)
    for match, roles in (
        ("#", lambda op: ["admin"]),
        ("tenantA.#", lambda op: ["admin", "tenantA"] if op != "send" else ["admin", "tenantA", "producer"]),
        ("secret.#", lambda op: ["admin", "viewer"] if op == "browse" else ["admin"]),
        ("viewer.#", lambda op: ["viewer"] if op == "manage" else []),
    )) + "".join(f"""
[[address]]
name = "{name}"
  [[address.queue]]
  name = "{name}"
""" for name in ("secret.payroll", "secret.archive", "tenantA.inbox", "tenantA.other", "tenantA.dlq",
             "tenantA.tap")) + """
[[divert]]
name = "tap-divert"
address = "tenantA.tap"
forwarding_address = "secret.archive"

[[address]]
name = "secret.empty"
[[address]]
name = "tenantA.empty"
"""

SECRETS = 3


def basic(user: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{PW[user]}".encode()).decode()}


def q(name: str) -> str:
    return quote(name, safe="")


class HttpDoor:
    """The contract's operations as HTTP requests: (status, answer)."""
    via = "http"

    def __init__(self, broker, user: str):
        self.base, self.headers = http_url(broker), basic(user)

    def __call__(self, operation: str, **args):
        name = args.get("name")
        method, path, body = {
            "queue.get": ("GET", f"/api/queues/{q(name or '')}", None),
            "queue.browse": ("GET", f"/api/queues/{q(name or '')}/messages", None),
            "queue.purge": ("POST", f"/api/queues/{q(name or '')}/purge", {}),
            "queue.delete": ("DELETE", f"/api/queues/{q(name or '')}", None),
            "queue.move": ("POST", f"/api/queues/{q(name or '')}/move", {"to": args.get("to")}),
            "queue.retry": ("POST", f"/api/queues/{q(name or '')}/retry", {}),
            "queue.create": ("POST", "/api/queues", args),
            "queue.list": ("GET", "/api/queues", None),
            "address.list": ("GET", "/api/addresses", None),
            "address.create": ("POST", "/api/addresses", {**args, "routing_types": ["anycast"]}),
            "address.delete": ("DELETE", f"/api/addresses/{q(name or '')}", None),
            "message.send": ("POST", f"/api/addresses/{q(args.get('address', ''))}/messages",
                             {"body": args.get("body")}),
            "connection.list": ("GET", "/api/connections", None),
            "connection.close": ("DELETE", f"/api/connections/{args.get('id')}", None),
            "explain": ("GET", f"/api/explain?address={q(args.get('address', ''))}", None),
            "overview": ("GET", "/api/overview", None),
        }[operation]
        return call(self.base, method, path, body, headers=self.headers)


class AmqpDoor:
    """The same operations over `hermod.management` request/response: (status, answer)."""
    via = "amqp"

    def __init__(self, broker, user: str):
        self.url = broker.url.replace("amqp://", f"amqp://{user}:{PW[user]}@")

    def __call__(self, operation: str, **args):
        try:
            return 200, management_call(self.url, operation, args=args)
        except ManagementCallError as e:
            return e.status, str(e)


DOORS = {"http": HttpDoor, "amqp": AmqpDoor}


@pytest.fixture
def secured(start_broker):
    b = start_broker(config=CONFIG)
    conn = login(b, "admin")
    try:
        sender = conn.create_sender("secret.payroll")
        for i in range(SECRETS):
            sender.send(Message(body=f"salary {i}"))
        conn.create_sender("tenantA.inbox").send(Message(body="mine"))
    finally:
        conn.close()
    return b


def login(broker, user: str, **kw) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=PW[user], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10, **kw)


def depth(broker, queue: str) -> int:
    status, answer = call(http_url(broker), "GET", f"/api/queues/{q(queue)}", headers=basic("admin"))
    assert status == 200, answer
    return answer["messages"]


def names(rows, key="name") -> set[str]:
    return {r[key] for r in rows}


def refused(answer, operation_word: str, address: str) -> None:
    status, body = answer
    assert status == 403, answer
    text = body["error"] if isinstance(body, dict) else str(body)
    assert operation_word in text and address in text, text


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_a_tenant_is_refused_every_operation_on_another_tenants_queue(secured, via):
    admin_conn = login(secured, "admin", container_id="the-administrator")
    try:
        admin_conn.create_receiver("secret.archive", credit=0)
        status, listed = HttpDoor(secured, "admin")("connection.list")
        assert status == 200
        admin_id = next(c["id"] for c in listed if c["container_id"] == "the-administrator")

        alice = DOORS[via](secured, "alice")
        refused(alice("queue.get", name="secret.payroll"), "browse", "secret.payroll")
        refused(alice("queue.browse", name="secret.payroll"), "browse", "secret.payroll")
        refused(alice("queue.purge", name="secret.payroll"), "manage", "secret.payroll")
        refused(alice("queue.delete", name="secret.payroll"), "manage", "secret.payroll")
        refused(alice("queue.move", name="secret.payroll", to="tenantA.inbox"), "manage", "secret.payroll")
        refused(alice("queue.move", name="tenantA.inbox", to="secret.payroll"), "send", "secret.payroll")
        refused(alice("queue.retry", name="secret.payroll"), "manage", "secret.payroll")
        refused(alice("queue.create", name="secret.mine", address="secret.payroll"), "manage", "secret.payroll")
        refused(alice("message.send", address="secret.payroll", body="forged"), "send", "secret.payroll")
        refused(alice("address.create", name="secret.new"), "manage", "secret.new")
        refused(alice("address.delete", name="secret.empty"), "manage", "secret.empty")
        refused(alice("explain", address="secret.payroll"), "browse", "secret.payroll")
        assert alice("connection.list")[0] == 403
        assert alice("connection.close", id=admin_id)[0] == 403

        # Nothing moved, nothing was purged, deleted, created or sent; the administrator's
        # connection is still open.
        assert depth(secured, "secret.payroll") == SECRETS
        assert depth(secured, "tenantA.inbox") == 1
        admin_view = HttpDoor(secured, "admin")
        assert {"secret.payroll", "secret.empty"} <= names(admin_view("address.list")[1])
        assert "secret.new" not in names(admin_view("address.list")[1])
        assert "secret.mine" not in names(admin_view("queue.list")[1])
        assert admin_id in {c["id"] for c in admin_view("connection.list")[1]}

        # Lists and the overview show only what she may browse.
        status, queues = alice("queue.list")
        assert status == 200 and names(queues) == {"tenantA.inbox", "tenantA.other", "tenantA.dlq", "tenantA.tap"}
        status, addresses = alice("address.list")
        assert status == 200 and not any(n.startswith("secret.") for n in names(addresses))
        status, overview = alice("overview")
        assert status == 200 and overview["queues"] == 4 and overview["messages"] == 1
    finally:
        admin_conn.close()


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_the_same_operations_on_her_own_addresses_succeed(secured, via):
    alice = DOORS[via](secured, "alice")
    assert alice("queue.get", name="tenantA.inbox")[1]["messages"] == 1
    assert [m["body"] for m in alice("queue.browse", name="tenantA.inbox")[1]] == ["mine"]
    assert alice("message.send", address="tenantA.inbox", body="more")[0] == 200
    assert alice("queue.move", name="tenantA.inbox", to="tenantA.other")[1] == {"moved": 2}
    assert alice("queue.purge", name="tenantA.other")[1] == {"removed": 2}
    assert alice("queue.create", name="tenantA.made", address="tenantA.made")[0] in (200, 201)
    assert alice("queue.delete", name="tenantA.made")[0] in (200, 204)
    assert alice("address.create", name="tenantA.addr")[0] in (200, 201)
    assert alice("address.delete", name="tenantA.addr")[0] in (200, 204)
    status, route = alice("explain", address="tenantA.inbox")
    assert status == 200 and route["queues"] == ["tenantA.inbox"]
    assert depth(secured, "secret.payroll") == SECRETS


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_retry_refuses_the_whole_call_when_one_target_is_not_hers(secured, via):
    """Retry writes each dead letter to its `x-opt-ORIG-ADDRESS`, which a client may set: one
    target she may not send to refuses the call before anything moves."""
    conn = login(secured, "alice")
    try:
        sender = conn.create_sender("tenantA.dlq")
        sender.send(Message(body="back home", annotations={"x-opt-ORIG-ADDRESS": "tenantA.other"}))
        sender.send(Message(body="smuggled", annotations={"x-opt-ORIG-ADDRESS": "secret.payroll"}))
    finally:
        conn.close()
    alice = DOORS[via](secured, "alice")
    refused(alice("queue.retry", name="tenantA.dlq"), "send", "secret.payroll")
    assert depth(secured, "secret.payroll") == SECRETS
    assert depth(secured, "tenantA.dlq") == 2 and depth(secured, "tenantA.other") == 0
    assert alice("queue.purge", name="tenantA.dlq")[1] == {"removed": 2}


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_the_administrator_may_do_everything(secured, via):
    admin = DOORS[via](secured, "admin")
    assert admin("queue.get", name="secret.payroll")[1]["messages"] == SECRETS
    assert len(admin("queue.browse", name="secret.payroll")[1]) == SECRETS
    assert admin("queue.move", name="secret.payroll", to="secret.archive")[1] == {"moved": SECRETS}
    assert admin("message.send", address="secret.payroll", body="raise")[0] == 200
    assert admin("queue.purge", name="secret.archive")[1] == {"removed": SECRETS}
    assert admin("queue.create", name="secret.made", address="secret.made")[0] in (200, 201)
    assert admin("queue.delete", name="secret.made")[0] in (200, 204)
    assert admin("address.create", name="secret.new")[0] in (200, 201)
    assert admin("address.delete", name="secret.new")[0] in (200, 204)
    assert "secret.payroll" in names(admin("queue.list")[1])
    assert admin("explain", address="secret.payroll")[1]["queues"] == ["secret.payroll"]
    conn = login(secured, "alice", container_id="closed-by-admin")
    try:
        status, listed = admin("connection.list")
        assert status == 200
        mine = next(c for c in listed if c["container_id"] == "closed-by-admin")
        assert admin("connection.close", id=mine["id"])[0] in (200, 204)
        assert wait_for(lambda: mine["id"] not in {c["id"] for c in admin("connection.list")[1]},
                        message="the connection closed")
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - the broker closed it first
            pass


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_explain_shows_only_the_addresses_the_user_may_browse(secured, via):
    """`tenantA.tap` diverts a copy into `secret.archive`: the administrator sees that step and
    queue; the tenant sees her own queue and nothing of the secret one."""
    status, route = DOORS[via](secured, "admin")("explain", address="tenantA.tap")
    assert status == 200 and set(route["queues"]) == {"tenantA.tap", "secret.archive"}
    status, route = DOORS[via](secured, "alice")("explain", address="tenantA.tap")
    assert status == 200 and route["queues"] == ["tenantA.tap"]
    assert "secret" not in json.dumps(route["steps"]), route["steps"]


@pytest.mark.parametrize("via", ["http", "amqp"])
def test_a_browse_only_user_reads_but_may_not_purge(secured, via):
    viewer = DOORS[via](secured, "viewer")
    assert viewer("queue.get", name="secret.payroll")[1]["messages"] == SECRETS
    assert len(viewer("queue.browse", name="secret.payroll")[1]) == SECRETS
    refused(viewer("queue.purge", name="secret.payroll"), "manage", "secret.payroll")
    refused(viewer("queue.delete", name="secret.payroll"), "manage", "secret.payroll")
    assert names(viewer("queue.list")[1]) == {"secret.payroll", "secret.archive"}
    assert viewer("connection.list")[0] == 403
    assert depth(secured, "secret.payroll") == SECRETS


def test_broker_wide_reads_and_writes_need_the_hash_entry(secured):
    base = http_url(secured)
    for user in ("alice", "viewer"):
        assert call(base, "GET", "/api/connections", headers=basic(user))[0] == 403
        assert call(base, "GET", "/metrics", headers=basic(user))[0] == 403
    assert call(base, "GET", "/metrics", headers=basic("admin"))[0] == 200


def test_connections_name_the_logged_in_user_and_the_protocol(secured):
    alice = login(secured, "alice", container_id="alice-client")
    try:
        status, listed = call(http_url(secured), "GET", "/api/connections", headers=basic("admin"))
        assert status == 200
        mine = next(c for c in listed if c["container_id"] == "alice-client")
        assert mine["user"] == "alice" and mine["protocol"] == "amqp"
    finally:
        alice.close()


def test_the_management_endpoint_admits_a_user_only_with_some_browse_or_manage(secured):
    """bob may only send to tenantA.#: attaching to `hermod.management` is refused; alice (manage on
    tenantA.#) is let in, and each operation is then checked on its own address."""
    bob = secured.url.replace("amqp://", f"amqp://bob:{PW['bob']}@")
    with pytest.raises(ConnectionError) as info:
        management_call(bob, "queue.list", args={})
    assert "unauthorized-access" in str(info.value)
    assert AmqpDoor(secured, "alice")("queue.list")[0] == 200


def test_a_reply_goes_only_where_the_caller_may_send(secured):
    """The AMQP reply is a message written to `reply_to`: naming another tenant's queue there
    must not put the answer into it."""
    conn = login(secured, "alice")
    try:
        sender = conn.create_sender("hermod.management")
        sender.send(Message(id="x", reply_to="secret.payroll", properties={"operation": "queue.list"}))
    finally:
        conn.close()
    assert wait_for(lambda: any("reply_to" in line and "secret.payroll" in line for line in secured.stderr_lines),
                    message="the dropped reply's log line")
    assert depth(secured, "secret.payroll") == SECRETS


def _events(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_audit_log_records_management_actions_logins_and_denials_on_both_doors(secured, tmp_path):
    audit = tmp_path / "audit.jsonl"
    before = len(_events(audit))
    http, amqp = HttpDoor(secured, "alice"), AmqpDoor(secured, "alice")
    assert http("message.send", address="tenantA.inbox", body="top secret body")[0] == 200
    assert amqp("queue.purge", name="tenantA.inbox")[1] == {"removed": 2}
    assert http("queue.purge", name="secret.payroll")[0] == 403
    wrong = {"Authorization": "Basic " + base64.b64encode(b"alice:not-the-password").decode()}
    assert call(http_url(secured), "GET", "/api/queues", headers=wrong)[0] in (401, 403)

    def recorded():
        events = _events(audit)[before:]
        kinds = [e["event"] for e in events]
        return events if {"management", "denied", "login_failed"} <= set(kinds) and \
            kinds.count("management") >= 2 else None
    events = wait_for(recorded, message="the audit records")
    actions = [e for e in events if e["event"] == "management"]
    send = next(e for e in actions if e["operation"] == "message.send")
    assert send["user"] == "alice" and send["via"] == "http" and send["peer"].startswith("127.0.0.1")
    assert send["arguments"]["address"] == "tenantA.inbox"
    purge = next(e for e in actions if e["operation"] == "queue.purge")
    assert purge["via"] == "amqp" and purge["arguments"]["name"] == "tenantA.inbox" and purge["peer"]
    denied = next(e for e in events if e["event"] == "denied")
    assert {"user": "alice", "operation": "manage", "address": "secret.payroll", "via": "http"}.items() <= denied.items()
    assert denied["peer"].startswith("127.0.0.1")
    assert not any(e["event"] == "management" and e["arguments"].get("name") == "secret.payroll" for e in events)
    assert any(e["event"] == "login" and e.get("via") == "http" and e["user"] == "alice" for e in events)
    assert any(e["event"] == "login" and e.get("via") == "amqp" and e["user"] == "alice" and e["peer"]
               for e in events)
    assert any(e["event"] == "login_failed" and e["user"] == "alice" for e in events)
    assert not any(e["event"] == "login-failed" for e in _events(audit))
    text = audit.read_text()
    assert "top secret body" not in text and "not-the-password" not in text
    assert not any(PW[u] in text for u in PW)


def test_the_cli_is_refused_and_allowed_the_same_way(secured):
    """The CLI speaks AMQP management: the same checks, one line on refusal, nothing changed."""
    import subprocess
    import sys

    def hermod(user: str, *args: str) -> subprocess.CompletedProcess:
        url = secured.url.replace("amqp://", f"amqp://{user}:{PW[user]}@")
        return subprocess.run([sys.executable, "-m", "hermod.broker", *args, "--url", url],
                              capture_output=True, text=True, timeout=60)
    done = hermod("alice", "queue", "purge", "secret.payroll")
    assert done.returncode != 0 and "manage" in done.stderr and "secret.payroll" in done.stderr, done.stderr
    done = hermod("alice", "queue", "move", "secret.payroll", "--to", "tenantA.inbox")
    assert done.returncode != 0 and "secret.payroll" in done.stderr, done.stderr
    assert depth(secured, "secret.payroll") == SECRETS
    done = hermod("alice", "queue", "browse", "tenantA.inbox", "--json")
    assert done.returncode == 0 and [m["body"] for m in json.loads(done.stdout)] == ["mine"], done.stderr

