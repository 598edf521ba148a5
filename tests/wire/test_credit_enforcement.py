"""Credit is a limit, not advice (contract: "Delivery guarantees and limits on what clients
send"): transfers beyond the credit the broker granted end the link with
`amqp:link:transfer-limit-exceeded` and are never queued; what a client sends on a link the
broker refused or closed is thrown away, not buffered; producer credit comes back as the
store commits, not as transfers arrive. The clients here are hand-framed (amqp_frames):
Proton's own engine will not send past its credit."""
from __future__ import annotations

import sqlite3
import time

from proton import Data, Described, uint, ulong

from amqp_frames import (ATTACH, DETACH, DISPOSITION, FLOW, TRANSFER, FrameClient, encode, frame,
                         assert_serving, link_credit_limit, message, open_sender, rss_kib,
                         settled_count)
from wire_helpers import connect, receive_bodies, send

BLOCKED = """
[[address_settings]]
match = "credit.#"
max_size_bytes = 1
address_full_policy = "block"
"""


def round_trip(client: FrameClient, channel: int, handle: int) -> None:
    """Every frame sent before has been handled once a new attach is answered."""
    client.attach_receiver(channel, handle, f"sync.{handle}")


def test_transfers_beyond_credit_end_the_link_and_are_never_queued(start_broker):
    # The address is full under `block`: the broker grants no more credit after the first 1000.
    b = start_broker(config=BLOCKED)
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    credit = open_sender(client, "credit.limit")
    assert credit == 1000
    client.transfers(0, 0, 0, [b"m%d" % i for i in range(2000)])
    detach = client.expect(DETACH)
    assert detach.error(2) == "amqp:link:transfer-limit-exceeded"
    client.close()
    conn = connect(b.url)
    r = conn.create_receiver("credit.limit", credit=100)
    assert receive_bodies(r, 1000) == [b"m%d" % i for i in range(1000)]
    send(conn, "credit.limit", [b"after"])  # a polite client still gets through
    assert receive_bodies(r, 1) == [b"after"]
    conn.close()


def test_the_session_window_is_finite(broker):
    client = FrameClient(broker.address)
    client.handshake()
    begin = client.begin(0)
    # incoming-window, in frames: 2048, or one fewer where 2048 frames would reach 2 GiB (Proton's
    # session capacity is 32-bit: connection_limits caps it below 2^31 bytes)
    assert int(begin.fields[2]) in (2047, 2048)
    client.close()


def test_transfers_on_a_refused_link_are_thrown_away(broker):
    client = FrameClient(broker.address)
    client.handshake()
    client.begin(0)
    reply = client.attach_sender(0, 0, "refused::no-such-queue")
    assert client.expect(DETACH).error(2) == "amqp:not-found"
    assert reply.fields[6] is None  # null target: refused
    before = rss_kib(broker.proc.pid)
    body = b"x" * 20000
    for batch in range(10):  # 30 MB on a handle the broker refused, without credit
        client.transfers(0, 0, batch * 150, [body] * 150)
    round_trip(client, 0, 1)
    grown = rss_kib(broker.proc.pid) - before
    assert grown < 12_000, f"broker grew {grown} KiB"
    client.close()
    assert_serving(broker.url, "after.refused")


def test_the_rest_of_a_message_over_max_message_size_is_not_buffered(start_broker):
    b = start_broker(config="[server]\nmax_message_size = 100000\n")
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    open_sender(client, "too.big")
    before = rss_kib(b.proc.pid)
    chunk = b"y" * 60000
    client.transfer(0, 0, 0, chunk, more=True)
    # 30 MB more of the same transfer, sent on after the broker closed the link.
    continuation = frame(0, encode(TRANSFER, [uint(0), None, None, None, None, True]) + chunk)
    for _ in range(500):
        client.sock.sendall(continuation)
    assert client.expect(DETACH).error(2) == "amqp:link:message-size-exceeded"
    round_trip(client, 0, 1)
    grown = rss_kib(b.proc.pid) - before
    assert grown < 12_000, f"broker grew {grown} KiB"
    client.close()


def _declare() -> bytes:
    d = Data()
    d.put_object(Described(ulong(0x77), Described(ulong(0x31), [])))
    return d.encode()


def test_declares_beyond_the_coordinator_credit_end_the_coordinator_link(broker):
    client = FrameClient(broker.address)
    client.handshake()
    client.begin(0)
    coordinator = Described(ulong(0x30), [])
    client.send(0, ATTACH, ["txn", uint(0), False, None, None, Described(ulong(0x28), [None]), coordinator])
    client.expect(ATTACH)
    credit = None
    while credit is None:
        credit = link_credit_limit(client.expect(FLOW))
    assert credit == 100
    declare = _declare()
    client.sock.sendall(b"".join(
        frame(0, encode(TRANSFER, [uint(0), uint(i), b"%d" % i, uint(0), False, False]) + declare)
        for i in range(300)))
    assert client.expect(DETACH).error(2) == "amqp:link:transfer-limit-exceeded"
    # However the broker's reads were cut, it answered no more declares than it gave credit for;
    # the rest were settled with no outcome (thrown away).
    answered = sum(settled_count(f) for _, f in client.received
                   if f.code == DISPOSITION and len(f.fields) > 4 and f.fields[4] is not None)
    granted = max(link_credit_limit(f) or 0 for _, f in client.received if f.code == FLOW)
    assert 100 <= answered <= granted < 300
    client.close()


def _durable(body: bytes) -> bytes:
    return encode(0x70, [True]) + message(body)


def test_producer_credit_comes_back_when_the_store_commits_not_on_arrival(start_broker, tmp_path):
    db = tmp_path / "credit.db"
    b = start_broker(store=f"sqlite:///{db}")
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    assert open_sender(client, "credit.durable") == 1000
    lock = sqlite3.connect(db, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")  # the store cannot commit until the test lets it
    try:
        client.sock.sendall(b"".join(
            frame(0, encode(TRANSFER, [uint(0), uint(i), b"%d" % i, uint(0), False, False]) + _durable(b"d%d" % i))
            for i in range(1000)))
        # Nothing is stored, so nothing is settled and no credit comes back, however long.
        deadline = time.monotonic() + 2.0
        while (left := deadline - time.monotonic()) > 0:
            try:
                f = client.read(timeout=left)
            except TimeoutError:
                break
            assert f.code != DISPOSITION, f"settled before it was stored: {f.fields}"
            limit = link_credit_limit(f) if f.code == FLOW else None
            assert limit is None or limit <= 1000, f"credit granted while nothing committed: {f.fields}"
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    # Once stored: every transfer accepted, and the credit comes back.
    settled, limit = 0, 0
    while settled < 1000 or limit <= 1000:
        f = client.read()
        if f.code == DISPOSITION:
            settled += settled_count(f)
            assert f.fields[4] == Described(ulong(0x24), [])  # accepted
        elif f.code == FLOW and link_credit_limit(f) is not None:
            limit = link_credit_limit(f)
    assert settled == 1000 and limit > 1000
    client.close()
