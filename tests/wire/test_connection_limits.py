"""Limits on what one client may hold (contract, Operations): `max_connections`,
`max_sessions_per_connection`, `max_links_per_connection`. A breach is answered with
`amqp:resource-limit-exceeded` and a log line; the client's other sessions and links, and every
other client, carry on. Ended sessions are freed; a client that never reads is not read either."""
from __future__ import annotations

import fcntl
import subprocess
import sys
import select
import sqlite3
import struct
import termios
import time

import pytest
from proton import uint
from proton import ConnectionException, Delivery, Message
from proton.utils import SendException

from amqp_frames import (ATTACH, BEGIN, CLOSE, DETACH, DISPOSITION, END, FLOW, FrameClient, encode, frame,
                         assert_serving, link_credit_limit, open_sender, rss_kib, settled_count)
from hermod_testing import wait_for
from wire_helpers import connect, receive_bodies, send

LIMIT = "amqp:resource-limit-exceeded"


def logged(b, text: str) -> bool:
    return any(text in line for line in b.stderr_lines)


def unread(sock) -> int:
    """Bytes waiting in a socket's receive buffer."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def accepted(client: FrameClient, channel: int, handle: int, delivery_id: int, body: bytes) -> bool:
    client.transfer(channel, handle, delivery_id, body)
    while True:
        f = client.read()
        if f.code == DISPOSITION:
            return f.fields[4] is not None and int(f.fields[4].descriptor) == 0x24


def test_a_connection_over_max_connections_is_closed_and_the_others_carry_on(start_broker):
    b = start_broker(config="[server]\nmax_connections = 3\n")
    conns = [connect(b.url) for _ in range(3)]
    with pytest.raises(ConnectionException) as e:
        connect(b.url)
    assert LIMIT in str(e.value)
    wait_for(lambda: logged(b, "max_connections"), message="the log line")
    for i, c in enumerate(conns):
        send(c, f"limits.c{i}", [i])
        assert receive_bodies(c.create_receiver(f"limits.c{i}"), 1) == [i]
    conns.pop().close()

    def another():
        try:
            return connect(b.url)
        except ConnectionException:
            return None
    conns.append(wait_for(another, message="a connection once one closed"))
    for c in conns:
        c.close()


def test_a_session_over_the_limit_is_ended_and_the_others_carry_on(start_broker):
    b = start_broker(config="[server]\nmax_sessions_per_connection = 4\n")
    client = FrameClient(b.address)
    client.handshake()
    for channel in range(4):
        client.begin(channel)
    client.send(4, BEGIN, [None, uint(0), uint(100), uint(100)])
    client.expect(BEGIN)
    end = client.expect(END)
    assert end.channel == 4 and end.error(0) == LIMIT
    wait_for(lambda: logged(b, "max_sessions_per_connection"), message="the log line")
    open_sender(client, "limits.sessions", channel=3, handle=0)
    assert accepted(client, 3, 0, 0, b"still here")
    client.close()
    conn = connect(b.url)
    assert receive_bodies(conn.create_receiver("limits.sessions"), 1) == [b"still here"]
    conn.close()


def test_a_link_over_the_limit_is_refused_and_the_others_carry_on(start_broker):
    b = start_broker(config="[server]\nmax_links_per_connection = 5\n")
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    for handle in range(5):
        open_sender(client, f"limits.links.{handle}", handle=handle)
    refused = client.attach_sender(0, 5, "limits.links.5")
    assert refused.fields[6] is None
    assert client.expect(DETACH).error(2) == LIMIT
    wait_for(lambda: logged(b, "max_links_per_connection"), message="the log line")
    assert accepted(client, 0, 4, 0, b"link 4")
    # Detaching one makes room for another.
    client.send(0, DETACH, [uint(5), True])
    client.send(0, DETACH, [uint(0), True])
    client.expect(DETACH)
    open_sender(client, "limits.links.6", handle=6)
    assert accepted(client, 0, 6, 1, b"link 6")
    client.close()


def test_ten_thousand_links_on_one_connection(broker):
    """Past 1,024 links each attach is refused and the connection carries on (it is closed only
    once it holds 16 times the limit of refused links it never detached). Other clients never
    notice."""
    client = FrameClient(broker.address, timeout=60)
    client.handshake()
    client.begin(0)
    attaches = b"".join(frame(0, encode(ATTACH, [f"l{i}", uint(i), False, None, None, None, None]))
                        for i in range(10_000))
    client.sock.sendall(attaches)
    refused = answered = 0
    while answered < 10_000 or refused < 10_000 - 1024:
        f = client.read()
        assert f.code != CLOSE, f"closed with {f.error(0)} after {answered} attaches"
        if f.code == ATTACH:
            answered += 1
        elif f.code == DETACH:
            assert f.error(2) == LIMIT
            refused += 1
    assert answered == 10_000 and refused == 10_000 - 1024
    client.close()
    assert_serving(broker.url, "limits.after")


def test_session_churn_does_not_grow_the_broker(broker):
    client = FrameClient(broker.address, timeout=30)
    client.handshake()

    def churn(n: int) -> None:
        client.sock.sendall(b"".join(
            frame(0, encode(BEGIN, [None, uint(0), uint(100), uint(100)])) + frame(0, encode(END, []))
            for _ in range(n)))
        ends = 0
        while ends < n:
            if client.read().code == END:
                ends += 1

    for _ in range(3):
        churn(2000)  # warm up allocator pools
    before = rss_kib(broker.proc.pid)
    for _ in range(10):
        churn(2000)
    grown = rss_kib(broker.proc.pid) - before
    assert grown < 4_000, f"broker grew {grown} KiB over 20,000 sessions"  # was ~68 MB
    client.close()


def test_a_client_that_never_reads_is_not_read_either(start_broker):
    """Its consumer's output backs up past the high-water mark: the broker stops reading from
    it, so what it sends waits in its own socket, not in the broker's memory."""
    b = start_broker()
    producer = connect(b.url)
    body = b"z" * 100_000
    send(producer, "limits.backlog", [body] * 300)  # 30 MB for a consumer that never reads
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    assert open_sender(client, "limits.incoming", handle=1) == 1000
    client.attach_receiver(0, 0, "limits.backlog", wait=False)
    client.send(0, FLOW, [uint(0), uint(2048), uint(0), uint(2048), uint(0), uint(0), uint(100_000)])
    # The broker writes the backlog in one go: once any of it arrives, it knows it is backed up.
    wait_for(lambda: unread(client.sock) > 100_000, message="the backlog to start arriving")
    # One transfer of many frames (one credit), pushed without ever reading.
    chunk = b"w" * 60_000
    client.transfer(0, 1, 0, chunk, more=True)
    piece = frame(0, encode(0x14, [uint(1), None, None, None, None, True]) + chunk)
    client.sock.setblocking(False)
    pushed, stalled_since = 0, None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and pushed < 90_000_000:
        _, writable, _ = select.select([], [client.sock], [], 0.5)
        if not writable:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 1.5:
                break
            continue
        stalled_since = None
        try:
            pushed += client.sock.send(piece)
        except BlockingIOError:
            continue
    assert pushed < 40_000_000, f"the broker read {pushed} bytes from a client that never reads"
    # Meanwhile everyone else is served.
    send(producer, "limits.other", ["served"])
    assert receive_bodies(producer.create_receiver("limits.other"), 1) == ["served"]
    producer.close()
    client.close()


@pytest.mark.parametrize("table, line, key", [
    ("server", "max_connections = 0", "server.max_connections"),
    ("server", "max_links_per_connection = \"many\"", "server.max_links_per_connection"),
    ("server", "max_memory_mb = -1", "server.max_memory_mb"),
    ("server", "expiry_scan_ms = 0", "server.expiry_scan_ms"),
    ("server", "transaction_timeout_s = true", "server.transaction_timeout_s"),
    ("store", "give_up_s = 0", "store.give_up_s"),
])
def test_a_bad_limit_is_one_line_and_exit_2(tmp_path, table, line, key):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[{table}]\n{line}\n")
    done = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and key in done.stderr


def test_the_limits_and_knobs_are_config_keys(start_broker):
    b = start_broker(config="[server]\nmax_connections = 50\nmax_sessions_per_connection = 8\n"
                            "max_links_per_connection = 16\nmax_memory_mb = 64\nexpiry_scan_ms = 1000\n"
                            "transaction_timeout_s = 10\n[store]\ngive_up_s = 5\n")
    assert_serving(b.url, "limits.keys")


def test_store_give_up_s_is_a_config_key(start_broker, tmp_path):
    """[store] give_up_s: a durable send waiting on a locked database is rejected after it."""
    db = tmp_path / "give-up.db"
    b = start_broker(config="[store]\ngive_up_s = 1\n", store=f"sqlite:///{db}")
    conn = connect(b.url)
    sender = conn.create_sender("limits.giveup")
    lock = sqlite3.connect(db, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(SendException) as e:
            sender.send(Message(body="waits", durable=True), timeout=20)
        waited = time.monotonic() - started
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert e.value.state == Delivery.REJECTED
    assert 1 <= waited < 15  # the default (30 s) would outlast the send's own 20 s timeout
    conn.close()


def test_max_memory_mb_holds_producers_back_until_memory_is_freed(start_broker):
    b = start_broker(config="[server]\nmax_memory_mb = 1\n")
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    assert open_sender(client, "limits.memory") == 1000
    client.transfers(0, 0, 0, [b"k" * 2048] * 750)  # 1.5 MB: over the limit, 250 credit left
    settled = 0
    while settled < 750:
        f = client.read()
        if f.code == DISPOSITION:
            settled += settled_count(f)
    client.attach_sender(0, 1, None)  # a round trip: any credit granted would be here by now
    limits = [link_credit_limit(f) for _, f in client.received if f.code == FLOW]
    assert max(x for x in limits if x is not None) == 1000, limits
    conn = connect(b.url)
    assert len(receive_bodies(conn.create_receiver("limits.memory"), 750)) == 750
    while (link_credit_limit(client.expect(FLOW)) or 0) <= 1000:
        pass  # the credit comes back once the messages left memory
    conn.close()
    client.close()
