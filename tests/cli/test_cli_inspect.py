"""`hermod status`, `queue show`, `divert list`, `subscription list` against a real broker over
AMQP management: what each shows, one line and exit 2 for a refusal, --json."""
from __future__ import annotations

import json
import subprocess
import sys

from proton import Message
from proton.reactor import DurableSubscription
from proton.utils import BlockingConnection

from hermod.broker.tools.clients import Capabilities
from hermod_testing import wait_for

CONFIG = """
[[address]]
name = "orders"
  [[address.queue]]
  name = "orders"
[[address]]
name = "orders.ny"
  [[address.queue]]
  name = "orders.ny"
[[divert]]
name = "ny-divert"
address = "orders"
forwarding_address = "orders.ny"
filter = "office = 'New York'"
"""


def hermod(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True, timeout=60)


def one_line_refusal(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermod: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_status_names_the_node_store_listeners_and_counts(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'status.db'}"
    b = start_broker(config=CONFIG, store=store)
    port = int(b.url.rsplit(":", 1)[1])
    conn = BlockingConnection(b.url, timeout=10)
    conn.create_sender("orders").send(Message(body="x"))
    r = hermod("status", "--url", b.url, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["status"] == "ok" and s["store"] == {"kind": "sqlite", "up": True, "problem": None}
    assert s["node"].startswith("hermod@") and s["version"] and s["uptime_s"] >= 0
    assert s["queues"] == 2 and s["messages"] == 1 and s["connections"] >= 1
    main = [l for l in s["listeners"] if l["name"] == "main"]
    assert len(main) == 1 and main[0]["port"] == port and "amqp" in main[0]["served"]
    assert s["memory"]["used_bytes"] > 0 and s["memory"]["resident_bytes"] > 0
    text = hermod("status", "--url", b.url)
    assert text.returncode == 0
    lines = dict(line.split(None, 1) for line in text.stdout.splitlines())
    assert lines["node"] == s["node"] and lines["store"] == "sqlite up" and lines["messages"] == "1"
    assert f":{port} " in lines["listener"]
    conn.close()
    # the name is the same after a restart on the same store (metrics and dashboards key on it)
    b.stop()
    again = start_broker(config=CONFIG, store=store)
    assert json.loads(hermod("status", "--url", again.url, "--json").stdout)["node"] == s["node"]


def test_queue_show_lists_every_attribute_and_each_consumer_with_its_connection(start_broker):
    b = start_broker(config=CONFIG)
    conn = BlockingConnection(b.url, timeout=10, container_id="show-peer")
    try:
        conn.create_sender("orders.ny").send(Message(body="one"))
        conn.create_receiver("orders.ny", name="peer-link", credit=0)
        r = hermod("queue", "show", "orders.ny", "--url", b.url, "--json")
        assert r.returncode == 0, r.stderr
        q = json.loads(r.stdout)
        assert (q["name"], q["address"], q["routing_type"], q["messages"], q["ready"]) == \
            ("orders.ny", "orders.ny", "anycast", 1, 1)
        for key in ("max_consumers", "exclusive", "last_value_key", "durable", "filter", "scheduled", "paged",
                    "bytes_in_memory", "delivered", "expired", "owner"):
            assert key in q, key
        [c] = q["consumer_details"]
        assert c["container_id"] == "show-peer" and c["link"] == "peer-link" and c["protocol"] == "amqp"
        assert c["remote"] and c["connection"]
        text = hermod("queue", "show", "orders.ny", "--url", b.url).stdout.splitlines()
        assert "messages 1" in [" ".join(line.split()) for line in text]
        assert any("show-peer" in line and "peer-link" in line for line in text)
    finally:
        conn.close()
    one_line_refusal(hermod("queue", "show", "nosuch", "--url", b.url), "does not exist")


def test_divert_list_names_the_filter(start_broker):
    b = start_broker(config=CONFIG)
    BlockingConnection(b.url, timeout=10).create_sender("orders").send(
        Message(body="x", properties={"office": "New York"}))
    r = hermod("divert", "list", "--url", b.url, "--json")
    [d] = json.loads(r.stdout)
    assert (d["name"], d["address"], d["forwarding_address"], d["filter"], d["kind"]) == \
        ("ny-divert", "orders", ["orders.ny"], "office = 'New York'", "divert")
    assert d["fired"] == 1
    lines = hermod("divert", "list", "--url", b.url).stdout.splitlines()
    assert lines[0].split() == ["name", "kind", "address", "forwarding_address", "exclusive", "routing_type",
                                "fired", "filter"]
    assert lines[1].split()[:7] == ["ny-divert", "divert", "orders", "orders.ny", "false", "strip", "1"]
    assert lines[1].endswith("office = 'New York'")


def test_subscription_list_shows_durable_subscriptions_with_owner_selector_and_depth(start_broker):
    b = start_broker()
    conn = BlockingConnection(b.url, timeout=10, container_id="sub-client")
    receiver = conn.create_receiver("news", name="headlines", options=[DurableSubscription(), Capabilities("topic")])
    receiver.detach()
    conn.create_sender("news").send(Message(body="extra"))
    conn.close()
    wait_for(lambda: json.loads(hermod("subscription", "list", "--url", b.url, "--json").stdout), timeout=10)
    [s] = json.loads(hermod("subscription", "list", "--url", b.url, "--json").stdout)
    assert (s["address"], s["queue"], s["client_id"], s["subscription"], s["durable"], s["consumers"],
            s["messages"]) == ("news", "sub-client.headlines", "sub-client", "headlines", True, 0, 1)
    lines = hermod("subscription", "list", "--url", b.url).stdout.splitlines()
    assert lines[1].split()[:3] == ["news", "sub-client.headlines", "sub-client"]
