"""Idle HTTP clients cannot lock others out (issue 28, finding 15): when the listener is full,
idle keep-alive connections are closed first, and `/health` and `/metrics` still answer.
The listener takes 256 connections; these tests open more than that over real sockets."""
from __future__ import annotations

import socket
from urllib.parse import urlsplit

from http_helpers import call, http_url

LIMIT = 256  # broker/http/server.py MAX_CONNECTIONS


def _open(base: str) -> socket.socket:
    u = urlsplit(base)
    return socket.create_connection((u.hostname, u.port), timeout=10)


def _health_kept_alive(base: str) -> socket.socket:
    """A connection that asked for /health once and stays open, idle."""
    s = _open(base)
    s.sendall(f"GET /health HTTP/1.1\r\nHost: {urlsplit(base).netloc}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
        chunk = s.recv(4096)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ") and b"Connection: close" not in answer
    return s


def test_idle_keep_alive_connections_do_not_lock_out_the_api_metrics_or_health(broker):
    base = http_url(broker)
    idle = []
    try:
        for _ in range(LIMIT + 20):
            idle.append(_health_kept_alive(base))
        for _ in range(3):
            assert call(base, "GET", "/api/queues")[0] == 200
            assert call(base, "GET", "/metrics")[0] == 200
            assert call(base, "GET", "/health") == (200, {"status": "ok"})
    finally:
        for s in idle:
            s.close()


def test_silent_new_connections_do_not_lock_out_health_and_metrics(broker):
    """Connections that never send a request (not yet idle keep-alive ones): /health and
    /metrics still answer at once."""
    base = http_url(broker)
    silent = [_open(base) for _ in range(LIMIT + 5)]
    try:
        assert call(base, "GET", "/health") == (200, {"status": "ok"})
        assert call(base, "GET", "/metrics")[0] == 200
    finally:
        for s in silent:
            s.close()
