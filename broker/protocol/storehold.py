"""StoreHold: a connection's output waits for exactly the acknowledgements it must follow.

The contract ("Delivery guarantees"): acknowledgements a client settled before it closed its
connection cleanly, or before a later round trip the broker answered, are stored before the
broker answers. The broker cannot tell which of its frames answer a round trip, so every byte
of output taken from the transport after an acknowledgement was read waits until that
acknowledgement is stored; output taken before it does not, and reading goes on meanwhile.

How: acknowledgements on their way to the store are numbered as they are read (epochs 1, 2, ...);
output taken from the transport is tagged with the highest epoch read so far and written once
every acknowledgement up to its tag is stored (the stored watermark). Commits may complete out
of order: those above the watermark wait in a heap until the gap closes (O(log n) each).

Why not stop the connection while a commit runs (what Hermod did before): under a durable load
it turned the consumer into stop-and-go at the commit period, and acknowledgements read after
a pause could not join the commit in progress. Measured in benchmarks/durable.py (README).

A commit that fails counts as done here: its delivery stays unsettled (the consumer puts the
message back), which is what the client sees, so the output behind it need not wait longer.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Callable


class StoreHold:
    """Per connection: acknowledgement epochs read and stored, and the output held behind them."""

    __slots__ = ("read", "stored", "_early", "_chunks", "held_bytes", "over_budget")

    def __init__(self) -> None:
        self.read = 0  # acknowledgements read that went to the store (the last epoch given)
        self.stored = 0  # every epoch up to this one is stored (or failed)
        self._early: list[int] = []  # epochs stored above the watermark (a heap)
        self._chunks: deque = deque()  # (epoch, bytes) in output order
        self.held_bytes = 0
        self.over_budget = False  # held_bytes went over the connection's budget: not reading

    def begin(self) -> int:
        """An acknowledgement just read is on its way to the store: its epoch."""
        self.read += 1
        return self.read

    def end(self, epoch: int) -> bool:
        """The acknowledgement `epoch` is stored (or failed); True when the watermark moved."""
        if epoch != self.stored + 1:
            heapq.heappush(self._early, epoch)
            return False
        self.stored = epoch
        early = self._early
        while early and early[0] == self.stored + 1:
            self.stored = heapq.heappop(early)
        return True

    @property
    def holding(self) -> bool:
        return bool(self._chunks)

    def write(self, data: bytes, write: Callable[[bytes], object]) -> bool:
        """Output just taken from the transport: written now if no acknowledgement read before
        it is still being stored, else held. True when written."""
        if self.stored == self.read and not self._chunks:
            write(data)
            return True
        self._chunks.append((self.read, data))
        self.held_bytes += len(data)
        return False

    def release(self, write: Callable[[bytes], object]) -> bool:
        """Write the held output whose acknowledgements are all stored, in order; True if any.
        Output of one flush shares one tag, so it leaves whole (the socket stays at a frame
        boundary between flushes)."""
        chunks = self._chunks
        stored = self.stored
        wrote = False
        while chunks and chunks[0][0] <= stored:
            _, data = chunks.popleft()
            self.held_bytes -= len(data)
            write(data)
            wrote = True
        return wrote

    def crossed(self, budget: int) -> bool:
        """Whether held output went over `budget` or back under it since the last call."""
        over = self.held_bytes > budget
        if over == self.over_budget:
            return False
        self.over_budget = over
        return True


__all__ = ["StoreHold"]
