"""Heartbeats: a client that advertises an idle timeout gets an empty frame from the broker
within half of it, whatever the broker's own idle timeout, so it is never dropped for being
idle (AMQP 1.0 2.4.5)."""
from __future__ import annotations

import time

import pytest
from proton import Timeout

from amqp_frames import FrameClient
from wire_helpers import connect, receive_bodies, send


def test_a_client_with_a_3s_idle_timeout_stays_connected_while_idle(broker):
    conn = connect(broker.url, heartbeat=3)
    r = conn.create_receiver("hb.idle")
    # The idle period is the point of the test: nothing flows for over twice the timeout.
    with pytest.raises(Timeout):
        r.receive(timeout=8)
    send(conn, "hb.idle", ["alive"])
    assert receive_bodies(r, 1) == ["alive"]
    conn.close()


def test_empty_frames_arrive_within_half_the_advertised_idle_timeout(broker):
    client = FrameClient(broker.address)
    client.handshake(idle_timeout_ms=3000)
    opened = time.monotonic()
    empties = []
    deadline = opened + 4.0
    while (left := deadline - time.monotonic()) > 0:
        try:
            f = client.read(timeout=left)
        except TimeoutError:
            break
        assert f.code is None, f"unexpected {f.name} while idle: {f.fields}"
        empties.append(time.monotonic())
    client.close()
    assert len(empties) >= 2, empties
    gaps = [b - a for a, b in zip([opened, *empties], empties)]
    assert max(gaps) < 1.5, gaps
