"""Feeding received bytes to a Proton transport, shared by the server's connections and the
bridge's outgoing client."""
from __future__ import annotations

from typing import Callable

from cproton_ffi import lib


def _never() -> bool:
    return False


def push_input(transport, data: bytes, process: Callable[[], None], stopped: Callable[[], bool] = _never) -> None:
    """Push `data` into the transport's input. When its buffer is full, `process()` the events
    so far (which frees it) and go on; stop where the input side is closed (the rest is
    ignored), Proton refuses bytes, or `stopped()` says so. Usually one push: a read fits."""
    pos, n = 0, len(data)
    while pos < n and not stopped():
        capacity = lib.pn_transport_capacity(transport)
        if capacity == 0:
            process()
            capacity = lib.pn_transport_capacity(transport)
        if capacity <= 0:
            break
        piece = data[pos:pos + capacity] if (pos or n > capacity) else data
        pushed = lib.pn_transport_push(transport, piece, len(piece))
        if pushed < 0:
            break
        pos += pushed
