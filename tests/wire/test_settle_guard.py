"""A delivery whose acknowledgement is being stored is settled by the store's answer only: a
peer that settles it again meanwhile must not make the broker settle it early (Proton would
free it, and the store's answer would then settle freed memory)."""
from __future__ import annotations

import sqlite3

import pytest
from proton import Described, Timeout, uint, ulong

from amqp_frames import DISPOSITION, FLOW, TRANSFER, FrameClient
from wire_helpers import connect, receive_bodies, send

ACCEPTED = Described(ulong(0x24), [])


def test_a_peer_settling_again_while_its_ack_is_stored(start_broker, tmp_path):
    db = tmp_path / "acks.db"
    b = start_broker(store=f"sqlite:///{db}")
    producer = connect(b.url)
    send(producer, "acks.q", [f"m{i}" for i in range(20)], durable=True)
    client = FrameClient(b.address)
    client.handshake()
    client.begin(0)
    client.attach_receiver(0, 0, "acks.q")
    client.send(0, FLOW, [uint(0), uint(2048), uint(0), uint(2048), uint(0), uint(0), uint(10)])
    ids = []
    while len(ids) < 10:
        f = client.read()
        if f.code == TRANSFER:
            ids.append(int(f.fields[1]))
    lock = sqlite3.connect(db, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")  # the acknowledgements wait for the store
    try:
        for i in ids:
            client.send(0, DISPOSITION, [True, uint(i), None, False, ACCEPTED])
        client.attach_sender(0, 1, None, wait=False)  # a round trip behind the acknowledgements
        for i in ids:
            client.send(0, DISPOSITION, [True, uint(i), None, True, ACCEPTED])  # and again, settled
        # More credit: the broker sends ten new deliveries (Proton may reuse freed memory).
        client.send(0, FLOW, [uint(len(ids)), uint(2048), uint(0), uint(2048), uint(0), uint(10), uint(10)])
        # While the acknowledgements are not stored the broker answers nothing (contract:
        # settlements are stored before the broker answers a later round trip).
        with pytest.raises(TimeoutError):
            client.read(timeout=1.0)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    fresh = []
    while len(fresh) < 10:
        f = client.read()
        if f.code == TRANSFER:
            fresh.append(int(f.fields[1]))
    # A durable send accepted after the unlock: the acknowledgements before it are stored and
    # their callbacks have run.
    send(producer, "acks.after", ["after"], durable=True)
    client.attach_sender(0, 2, None)  # and everything the broker wrote meanwhile is here
    touched = [f for _, f in client.received if f.code == DISPOSITION and not f.fields[0]
               and int(f.fields[2] if f.fields[2] is not None else f.fields[1]) >= min(fresh)]
    assert touched == [], "the broker settled deliveries the client never acknowledged"
    client.close()
    # The broker is fine, and the ten acknowledged messages are gone for good.
    conn = connect(b.url)
    r = conn.create_receiver("acks.q")
    assert receive_bodies(r, 10) == [f"m{i}" for i in range(10, 20)]
    with pytest.raises(Timeout):
        r.receive(timeout=1)
    conn.close()
    assert b.proc.poll() is None
