"""A client of another protocol pointed at the HTTP port is told so at once (issue 33, finding 9:
an AMQP client hung 10.3 s, then read an HTTP 408 inside a framing error)."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from http_helpers import call, http_url

OPENINGS = {
    "amqp": b"AMQP\x00\x01\x00\x00",
    "amqp-sasl": b"AMQP\x03\x01\x00\x00",
    "mqtt": bytes([0x10, 0x10, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x04]) + b"dev1",
    "stomp": b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00",
    "openwire": struct.pack(">I", 30) + b"\x01ActiveMQ" + b"\x00" * 26,
}


@pytest.mark.parametrize("protocol", sorted(OPENINGS))
def test_another_protocols_client_is_told_within_a_second(broker, protocol):
    base = http_url(broker)
    host, port = base.split("://", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.settimeout(5)
        started = time.monotonic()
        s.sendall(OPENINGS[protocol])
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        elapsed = time.monotonic() - started
    assert elapsed < 1.0, elapsed
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:60]
    assert b"HTTP port" in answer and b"protocol listeners" in answer
    assert call(base, "GET", "/health")[0] == 200  # the listener carries on
