"""`hermod queue|address|connection|explain` against a real broker, over AMQP."""
from __future__ import annotations

import json
import subprocess
import sys

from proton import Message
from proton.utils import BlockingConnection


def hermod(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True, timeout=60)


def _send(url: str, address: str, *bodies: str) -> None:
    conn = BlockingConnection(url, timeout=10)
    sender = conn.create_sender(address)
    for i, b in enumerate(bodies):
        sender.send(Message(body=b, properties={"i": i}))
    conn.close()


def test_queue_commands_create_browse_move_purge_delete(broker):
    url = broker.url
    r = hermod("queue", "create", "cli-q", "--url", url)
    assert r.returncode == 0 and r.stdout.strip() == "created queue cli-q on cli-q (anycast)"
    _send(url, "cli-q", "one", "two", "three")
    r = hermod("queue", "browse", "cli-q", "--limit", "2", "--url", url, "--json")
    assert r.returncode == 0 and [m["body"] for m in json.loads(r.stdout)] == ["one", "two"]
    assert hermod("address", "create", "cli-target", "--url", url).returncode == 0
    assert hermod("queue", "create", "cli-target", "--url", url).returncode == 0
    r = hermod("queue", "move", "cli-q", "--to", "cli-target", "--filter", "i = 0", "--url", url)
    assert r.stdout.strip() == "moved 1 messages from cli-q to cli-target"
    r = hermod("queue", "purge", "cli-q", "--url", url)
    assert r.stdout.strip() == "removed 2 messages from cli-q"
    r = hermod("queue", "stat", "--url", url)
    assert "cli-target cli-target anycast true 1 0 1 0" in r.stdout
    r = hermod("address", "delete", "cli-target", "--url", url)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "has queues" in r.stderr
    assert hermod("queue", "delete", "cli-q", "--url", url).returncode == 0
    r = hermod("queue", "delete", "cli-q", "--url", url)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_explain_and_connection_list(broker):
    url = broker.url
    _send(url, "routed", "x")
    r = hermod("explain", "routed", "--property", "n=5", "--url", url)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "queues: routed"
    conn = BlockingConnection(url, timeout=10, container_id="cli-listed")
    try:
        r = hermod("connection", "list", "--url", url, "--json")
        assert any(c["container_id"] == "cli-listed" for c in json.loads(r.stdout))
    finally:
        conn.close()
