"""Aborted transfers (AMQP 1.0 §2.7.5 `aborted`): thrown away, never queued or answered, and the
link carries on. The producer link asks Proton whether a transfer was aborted only when it shows
one byte pending (Proton's mark of an abort: protocol/producer.py), so a real one-byte transfer
is pinned here too: it is read, and refused as the malformed message it is."""
from __future__ import annotations

from hostile_support import ROUND_TRIP_BOUND
from proton import uint
from raw_amqp import RawClient, message_bytes, performative, transfer
from test_hostile_clients import outcomes_of, read_until


def aborted(delivery_id: int | None, payload: bytes = b"") -> bytes:
    """A transfer frame with `aborted` set; no delivery-id: the rest of a multi-frame one."""
    fields = [uint(0), None if delivery_id is None else uint(delivery_id),
              None if delivery_id is None else delivery_id.to_bytes(8, "big"),
              None if delivery_id is None else uint(0), False, False, None, None, False, True]
    return performative("transfer", fields, payload=payload)


def test_aborted_transfers_are_thrown_away_and_the_link_carries_on(guarded):
    broker, guard = guarded()
    with RawClient(broker.address) as client:
        client.handshake("aborter")
        client.begin()
        client.attach_sender(0, "hostile.abort")
        client.expect("flow", lambda f: f.link == "snd-0")
        client.send(transfer(0, 0, message_bytes("before")))
        whole = message_bytes("aborted after its first frame")
        client.send(transfer(0, 1, whole[:12], more=True))  # the first frame of two...
        client.send(aborted(None, whole[12:20]))  # ...and the second aborts it
        client.send(aborted(2, message_bytes("aborted in its only frame")))
        client.send(transfer(0, 3, message_bytes("after")))
        client.send(transfer(0, 4, b"\x00"))  # one byte, not aborted: read, and malformed
        read_until(client, lambda: {0, 3, 4} <= set(outcomes_of(client.frames)), ROUND_TRIP_BOUND,
                   "the outcomes of the whole transfers")
        outcomes = outcomes_of(client.frames)
        assert outcomes == {0: "accepted", 3: "accepted", 4: "rejected"}, outcomes
    guard.expect("hostile.abort", ["before", "after"], send=False)
    guard.verify()
