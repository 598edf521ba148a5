"""Idle HTTP clients cannot lock others out (issue 28, finding 15): when the listener is full,
idle keep-alive connections are closed first, and `/health` and `/metrics` still answer.
The listener takes 256 connections; these tests open more than that over real sockets."""
from __future__ import annotations

import base64
import socket
import time
from urllib.parse import urlsplit

from hermod.broker.security.passwords import hash_password
from http_helpers import call, http_url

LIMIT = 256  # broker/http/server.py MAX_CONNECTIONS
ADMIN_PW = "admin-secret"
SECURED = (f'[[security.user]]\nname = "admin"\npassword_hash = "{hash_password(ADMIN_PW, iterations=64)}"\n'
           'roles = ["admin"]\n')


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


def test_a_password_guesser_holding_every_slot_does_not_lock_out_another_address(start_broker):
    """Wrong guesses from one address wait their turns in the login throttle (seconds each),
    busy, not idle: with all 256 slots held that way, a client from another address (here
    127.0.0.2) still gets its API answer."""
    b = start_broker(config=SECURED)
    base = http_url(b)
    u = urlsplit(base)
    wrong = _request(u.netloc, "GET", "/api/queues", ("admin", "wrong"))
    guessers = []
    try:
        for _ in range(LIMIT + 10):
            s = _open(base)
            s.sendall(wrong)
            guessers.append(s)
        other = socket.create_connection((u.hostname, u.port), timeout=10, source_address=("127.0.0.2", 0))
        started = time.monotonic()
        other.sendall(_request(u.netloc, "GET", "/api/queues", ("admin", ADMIN_PW)))
        answer = other.recv(4096)
        other.close()
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        assert time.monotonic() - started < 3.0
        assert call(base, "GET", "/health") == (200, {"status": "ok"})
    finally:
        for s in guessers:
            s.close()


def _request(netloc: str, method: str, path: str, creds: tuple[str, str]) -> bytes:
    token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
    return f"{method} {path} HTTP/1.1\r\nHost: {netloc}\r\nAuthorization: Basic {token}\r\n\r\n".encode()
