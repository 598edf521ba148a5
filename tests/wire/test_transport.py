"""Connection-level behaviour: big and multi-frame messages, bad input, heartbeats, many
connections, graceful stop."""
from __future__ import annotations

import socket
import threading

import pytest
from proton import Message
from proton.utils import LinkDetached, SendException

from hermod_testing import wait_for
from wire_helpers import connect, receive_bodies, send


def test_multi_frame_message_round_trip(start_broker):
    b = start_broker(config="[server]\nmax_frame_size = 4096\n")
    conn = connect(b.url)
    body = bytes(range(256)) * 8192  # 2 MiB, hundreds of frames each way
    send(conn, "big", [body])
    got = receive_bodies(conn.create_receiver("big"), 1)
    assert got[0] == body
    conn.close()


def test_message_over_max_message_size_is_refused_and_broker_stays_up(start_broker):
    b = start_broker(config="[server]\nmax_message_size = 10000\n")
    conn = connect(b.url)
    sender = conn.create_sender("limited")
    with pytest.raises((LinkDetached, SendException)) as e:
        sender.send(Message(body=b"x" * 50000))
    if isinstance(e.value, LinkDetached):
        assert e.value.condition == "amqp:link:message-size-exceeded"
    conn.close()
    conn = connect(b.url)
    send(conn, "limited", [b"small"])
    assert receive_bodies(conn.create_receiver("limited"), 1) == [b"small"]
    conn.close()


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\n\r\n",
    b"AMQP\x00\x01\x00\x00" + b"\xff" * 64,
    b"AMQP\x03\x01\x00\x00" + b"\x00\x00\x00\x08\x02\x01\x00\x00",
])
def test_malformed_input_gets_closed_and_the_broker_keeps_serving(broker, garbage):
    host, port = broker.address.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(garbage)
        s.settimeout(5)
        data = b""
        try:
            while chunk := s.recv(4096):
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        if garbage.startswith(b"GET "):  # the front door tells an HTTP client where it is
            assert data.startswith(b"HTTP/1.1 400 ") and b"speaks amqp" in data
        else:
            assert data.startswith(b"AMQP") or data == b""
    conn = connect(broker.url)
    send(conn, "still.up", ["yes"])
    assert receive_bodies(conn.create_receiver("still.up"), 1) == ["yes"]
    conn.close()


def test_client_that_stops_talking_is_dropped_after_the_idle_timeout(start_broker):
    b = start_broker(config="[server]\nidle_timeout_s = 0.5\n")
    host, port = b.address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        # SASL header only, then silence: the broker must not wait forever.
        s.sendall(b"AMQP\x03\x01\x00\x00")
        s.settimeout(10)
        received = b""
        while chunk := s.recv(4096):
            received += chunk
    assert received.startswith(b"AMQP")


def test_heartbeats_keep_an_idle_client_connected(start_broker):
    b = start_broker(config="[server]\nidle_timeout_s = 0.6\n")
    conn = connect(b.url, heartbeat=0.6)
    r = conn.create_receiver("hb")
    # Idle for several timeouts; both sides must send empty frames to keep the link alive.
    with pytest.raises(Exception):
        r.receive(timeout=2.5)
    send(conn, "hb", ["alive"])
    assert receive_bodies(r, 1) == ["alive"]
    conn.close()


def test_many_concurrent_connections(broker):
    n = 60
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            c = connect(broker.url)
            send(c, f"many.{i}", [i])
            assert receive_bodies(c.create_receiver(f"many.{i}"), 1) == [i]
            c.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]


def test_sigterm_closes_clients_and_exits_zero(start_broker):
    b = start_broker()
    conn = connect(b.url)
    r = conn.create_receiver("stopping")
    assert b.stop() == 0
    with pytest.raises(Exception) as e:
        r.receive(timeout=5)
    assert "forced" in str(e.value) or "closed" in str(e.value).lower()
    wait_for(lambda: b.proc.poll() is not None)
