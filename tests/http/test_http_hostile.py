"""Hostile HTTP clients: each gets an answer or is cut off within a bound, and the listener
keeps serving everybody else."""
from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

from http_helpers import call, http_url


def _connect(base: str) -> socket.socket:
    u = urlsplit(base)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    return s


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def test_a_request_line_of_one_megabyte_is_refused_with_431(broker):
    base = http_url(broker)
    s = _connect(base)
    line = b"GET /api/queues?" + b"x" * (1024 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    sender = threading.Thread(target=lambda: _sendall_quietly(s, line), daemon=True)
    sender.start()
    answer = _read_all(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b'"error"' in answer
    assert call(base, "GET", "/health") == (200, {"status": "ok"})


def _sendall_quietly(s: socket.socket, data: bytes) -> None:
    try:
        s.sendall(data)
    except OSError:
        pass  # the server stopped reading: expected


def test_a_slowloris_client_is_cut_off_while_others_are_served(start_broker):
    b = start_broker(env={"HERMOD_HTTP_HEAD_TIMEOUT_S": "1"})
    base = http_url(b)
    s = _connect(base)
    started = time.monotonic()
    stop = threading.Event()

    def trickle():
        for ch in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
            if stop.is_set():
                return
            try:
                s.send(bytes([ch]))
            except OSError:
                return
            time.sleep(0.1)
    threading.Thread(target=trickle, daemon=True).start()
    assert call(base, "GET", "/health") == (200, {"status": "ok"})  # served meanwhile
    answer = _read_all(s)
    stop.set()
    s.close()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 5


def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(broker):
    base = http_url(broker)
    s = _connect(base)
    s.sendall(b"POST /api/queues HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
    answer = _read_all(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_keep_alive_serves_several_requests_on_one_connection(broker):
    base = http_url(broker)
    s = _connect(base)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = _read_all(s)
    s.close()
    assert answer.count(b"HTTP/1.1 200 OK") == 2 and answer.count(b'{"status": "ok"}') == 2


def test_garbage_request_line_is_400(broker):
    base = http_url(broker)
    s = _connect(base)
    s.sendall(b"\x16\x03\x01 hello\r\n\r\n")
    answer = _read_all(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
