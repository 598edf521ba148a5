"""A peek is bounded and never stalls AMQP traffic (issue 28, finding 13).

Contract (the peek row): a body over 64 KiB is cut to its first 64 KiB of bytes (text at a
character boundary) with `"body_truncated": true` (false otherwise, every row has the key); the
list ends before the message whose body would take the answer past 16 MiB; building it never
stalls AMQP traffic. Before: one peek of 8 x 16 MiB built 171 MiB of JSON on the loop and AMQP
round trips stalled for seconds."""
from __future__ import annotations

import base64
import json
import threading
import time

from proton import Message
from proton.utils import BlockingConnection

from http_helpers import call, http_url, q, send

KIB = 1024
MIB = 1024 * KIB
CUT = 64 * KIB


def test_peeking_big_messages_does_not_stall_a_bystander(broker):
    base = http_url(broker)
    big = "x" * (16 * MIB)
    send(broker.url, "big", *(Message(body=big) for _ in range(8)))
    conn = BlockingConnection(broker.url, timeout=30)
    sender, receiver = conn.create_sender("bystander"), conn.create_receiver("bystander")
    worst, trips, stop = [0.0], [0], threading.Event()

    def round_trips():
        while not stop.is_set():
            started = time.monotonic()
            sender.send(Message(body="ping"))
            receiver.receive(timeout=30)
            receiver.accept()
            worst[0] = max(worst[0], time.monotonic() - started)
            trips[0] += 1
    t = threading.Thread(target=round_trips, daemon=True)
    t.start()
    try:
        for _ in range(3):
            status, rows = call(base, "GET", "/api/queues/big/messages?limit=8")
            assert status == 200 and len(rows) == 8
            for row in rows:
                assert row["body_truncated"] is True and row["body_encoding"] == "text"
                assert row["body"] == "x" * CUT
    finally:
        stop.set()
        t.join(60)
        conn.close()
    assert trips[0] > 0 and worst[0] < 1.0, (worst[0], trips[0])
    assert call(base, "GET", "/api/queues/big")[1]["messages"] == 8  # a peek takes nothing


def test_bodies_are_cut_at_64_kib_at_a_character_boundary(broker):
    base = http_url(broker)
    straddling = "a" * (CUT - 1) + "é" + "b" * 5000  # é is 2 bytes: bytes 65535-65536
    binary = bytes(range(256)) * 400  # 100 KiB, not UTF-8
    send(broker.url, "cut",
         Message(body="small"),
         Message(body=straddling),
         Message(body=binary, inferred=True),  # a data section
         Message(body=binary),  # an amqp-value binary
         Message(body="c" * CUT))  # exactly 64 KiB: whole
    status, rows = call(base, "GET", "/api/queues/cut/messages")
    assert status == 200 and len(rows) == 5
    assert all("body_truncated" in r for r in rows)
    assert (rows[0]["body"], rows[0]["body_truncated"]) == ("small", False)
    assert rows[1]["body"] == "a" * (CUT - 1) and rows[1]["body_truncated"] is True
    for row in rows[2:4]:
        assert row["body_encoding"] == "base64" and row["body_truncated"] is True
        assert base64.b64decode(row["body"]) == binary[:CUT]
    assert (rows[4]["body"], rows[4]["body_truncated"]) == ("c" * CUT, False)


def test_the_answer_ends_before_16_mib(broker):
    base = http_url(broker)
    binary = bytes(range(256)) * 400  # each row: 64 KiB in base64, about 87 KiB of JSON
    for start in range(0, 240, 40):
        send(broker.url, "deep", *(Message(body=binary, properties={"n": start + i}) for i in range(40)))
    status, rows = call(base, "GET", f"/api/queues/{q('deep')}/messages?limit=1000")
    assert status == 200
    size = len(json.dumps(rows))
    assert size <= 16 * MIB, size
    assert 150 < len(rows) < 240, len(rows)
    assert [r["properties"]["n"] for r in rows] == list(range(len(rows)))  # the first ones, in order
    assert size + len(json.dumps(rows[-1])) > 16 * MIB - 200 * KIB  # and no fewer than fit
