"""The link-recovery frame tap (protocol/recovery.py) follows frame boundaries however the
stream is cut into reads: attach frames come out whole, everything passes in order. Checked
against every cut of a small stream (its fast path passes whole runs of other frames at once)."""
from __future__ import annotations

import random
import struct

import pytest

from hermod.broker.protocol.recovery import ATTACH, TRANSFER, _Frames

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def frame(code: int | None, payload: bytes = b"", channel: int = 0) -> bytes:
    body = b"" if code is None else b"\x00\x53" + bytes((code,)) + b"\xc0" + bytes((len(payload) + 1, 1)) + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


STREAM = [AMQP_HEADER, frame(0x10, b"\x40"), frame(None), frame(TRANSFER, b"\xa0\x05hello" * 30),
          frame(0x13, b"\x43"), frame(ATTACH, b"\xa1\x04link" * 3), frame(TRANSFER, b"\x40"),
          frame(ATTACH, b"\xa1\x05other"), frame(0x15, b"\x41") * 3]
DATA = b"".join(STREAM)
ATTACHES = [f for f in STREAM if len(f) > 10 and f[10] == ATTACH]


def run(cuts: list[int], hold: bool = True):
    frames = _Frames()
    pieces, whole = [], []
    edges = [0, *cuts, len(DATA)]
    for a, b in zip(edges, edges[1:]):
        for piece, code in frames.split(DATA[a:b], hold=hold):
            pieces.append(bytes(piece))
            if code == ATTACH:
                whole.append(bytes(piece))
    return b"".join(pieces), whole


@pytest.mark.parametrize("cut", range(1, len(DATA)))
def test_every_single_cut_keeps_the_stream_and_finds_each_attach_whole(cut):
    assert run([cut]) == (DATA, ATTACHES)


def test_random_cuts_and_no_hold():
    rng = random.Random(18)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(DATA)), rng.randint(1, 12)))
        assert run(cuts) == (DATA, ATTACHES)
        assert run(cuts, hold=False)[0] == DATA
    assert run([]) == (DATA, ATTACHES)
