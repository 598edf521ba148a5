"""Answers in the order of the frames they answer. A RECEIPT for a SEND waits for the store, and
a later frame's RECEIPT (DISCONNECT's above all) must not overtake it: every answer takes a slot
in a FIFO and is written when every slot ahead of it is filled. An acknowledgement being stored
takes an empty slot, so a later RECEIPT also says it is stored (the contract's "acknowledgements
a client settled before a round trip the broker answered are stored")."""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import StompConnection

_PENDING = object()
HANDLED = object()  # a frame handler's answer: it writes (or reserved) the frame's RECEIPT itself


class Slot:
    __slots__ = ("data", "then_close")

    def __init__(self) -> None:
        self.data: object = _PENDING
        self.then_close = False


class Answers:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.queue: deque[Slot] = deque()

    def reserve(self) -> Slot:
        slot = Slot()
        self.queue.append(slot)
        return slot

    def fill(self, slot: Slot, data: bytes | None, then_close: bool = False) -> None:
        """The answer of `slot` (None: nothing to write, only its turn)."""
        slot.data = data
        slot.then_close = then_close
        self.flush()

    def add(self, data: bytes | None, then_close: bool = False) -> None:
        self.fill(self.reserve(), data, then_close)

    def flush(self) -> None:
        queue, conn = self.queue, self.conn
        while queue and queue[0].data is not _PENDING:
            slot = queue.popleft()
            if slot.data is not None:
                conn.write(slot.data)  # type: ignore[arg-type]
            if slot.then_close:
                queue.clear()
                conn.close()
                return

    @property
    def waiting(self) -> int:
        return len(self.queue)
