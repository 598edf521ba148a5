"""Shared-store HA, while both brokers run (contract, "High availability and bridges"): the
second broker of a store waits as a backup, redirects AMQP clients to the live node, answers
/health with 503, and the live node names it in `failover-server-list`."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from ha_testing import BACKUP, HTTP, drain, failover_urls, host_port, probe, send_durable

from hermod_testing import wait_for


def test_a_second_broker_waits_as_backup_and_redirects_to_the_live_one(ha_db, nodes):
    _, _, url = ha_db
    live = nodes("node-a", url)
    live_url = live.wait_ready()
    backup = nodes("node-b", url, http=True)

    assert backup.wait_line(BACKUP, 20).group(1) == "node-a"
    answer = probe(backup.listener_url)
    # AMQP's way to refuse: an open, then at once a close carrying the condition.
    assert answer.condition is not None, answer.error
    assert answer.condition.name == "amqp:connection:redirect"
    info = answer.condition.info
    host, port = host_port(live_url)
    assert (info["hostname"], info["network-host"], info["port"], info["scheme"]) == (
        host, host, port, "amqp")
    assert backup.url is None  # no readiness line while the lease is node-a's

    health = backup.wait_line(HTTP, 5).group(1) + "/health"
    try:
        urllib.request.urlopen(health, timeout=5)
        raise AssertionError("a backup's /health answered 2xx")
    except urllib.error.HTTPError as error:
        assert error.code == 503
        assert json.loads(error.read())["status"] == "backup"

    # The live node names its backup to every client it opens a connection with.
    listed = wait_for(lambda: failover_urls(probe(live_url).properties or {}), 10,
                      message="node-b in node-a's failover-server-list")
    assert listed == [backup.listener_url]

    # A client that follows the redirect reaches the live node.
    redirected = f"amqp://{info['network-host']}:{int(info['port'])}"
    assert send_durable(redirected, ["one", "two"]) == ["one", "two"]
    assert drain(redirected, idle_s=1) == ["one", "two"]


def test_a_broker_without_ha_is_refused_a_shared_store_naming_the_node(ha_db, nodes, tmp_path):
    _, _, url = ha_db
    nodes("node-a", url).wait_ready()

    refused = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0",
                              "--http-port", "-1", "--store", url],
                             cwd=tmp_path, capture_output=True, text=True, timeout=30)

    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "in use by another broker: node-a" in lines[0], refused.stderr
    assert refused.stdout == ""
