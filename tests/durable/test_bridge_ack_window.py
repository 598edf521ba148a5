"""A bridge whose local store is slow to take acknowledgements (issue 19's bound on
duplicates): a message the remote accepted stays in the bridge's window until its
acknowledgement is stored, so a SIGKILL of the local broker resends at most WINDOW messages.

A loaded CI run once saw 1,594 duplicates in tests/bridge/test_bridge_hermod.py: the window
counted only what the remote had not settled, and acknowledgements waiting for the store piled
up behind it. Here every delete of references takes 300 ms on PostgreSQL, so the pile-up
happens on every run, not by luck."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

BRIDGE_TESTS = Path(__file__).resolve().parent.parent / "bridge"
if str(BRIDGE_TESTS) not in sys.path:
    sys.path.insert(0, str(BRIDGE_TESTS))

from bridge_testing import (REMOTE_CONFIG, bridged_queue_config, free_port, numbered,  # noqa: E402
                            queue_row, read_all, send_all)
from durable_clients import slow_down_acknowledgements  # noqa: E402
from hermod.broker.bridge import WINDOW  # noqa: E402
from hermod_testing import wait_for  # noqa: E402

TOTAL = 4000


def test_a_local_broker_killed_while_its_store_lags_resends_at_most_the_window(start_broker, pg_store_url,
                                                                               tmp_path):
    port = free_port()
    config = bridged_queue_config(f"amqp://127.0.0.1:{port}")
    local = start_broker(config=config, store=pg_store_url)
    assert send_all(local.url, "outbound", numbered(TOTAL)) == TOTAL
    slow_down_acknowledgements(pg_store_url)
    remote_store = f"sqlite:///{tmp_path / 'remote.db'}"
    # An AMQP port given: the HTTP port would be the default 8161, which another run may hold.
    remote = start_broker("--port", str(port), "--http-port", "0", config=REMOTE_CONFIG, store=remote_store)
    # More than a window forwarded: the old window let the remote take thousands while the
    # store had deleted a few hundred.
    wait_for(lambda: queue_row(remote.url, "inbound")["messages"] >= 2 * WINDOW, timeout=60,
             message="two windows forwarded")
    local.kill()
    local = start_broker(config=config, store=pg_store_url)
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, timeout=120, message="backlog forwarded")
    got = read_all(remote.url, "inbound", TOTAL, idle=0.5)
    counts = Counter(m.properties["n"] for m in got)
    assert set(counts) == set(range(TOTAL))
    duplicates = sum(c - 1 for c in counts.values())
    assert duplicates <= WINDOW, f"{duplicates} messages resent after the kill"
