"""What a post office uses when nothing else is plugged in: the wall clock, timers driven by
hand (tests), and the `memory` store, which persists nothing and completes every unit at once."""
from __future__ import annotations

import time
from typing import Callable

from . import ports


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class NoTimers:
    """Timers for a post office driven by hand (tests): nothing fires by itself."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, Callable[[], None]]] = []

    def call_at(self, due_ms: int, fn: Callable[[], None]):
        entry = (due_ms, fn)
        self.pending.append(entry)

        class Handle:
            def cancel(handle) -> None:
                if entry in self.pending:
                    self.pending.remove(entry)
        return Handle()


class MemoryJournal:
    """The `memory` store: nothing is persisted, every unit completes at once."""

    durable = False

    @staticmethod
    def problem() -> str | None:
        """Memory always answers."""
        return None

    def recover(self) -> ports.Recovered:
        return ports.Recovered([], [], {}, 1)

    def submit(self, ops, done) -> None:
        if done is not None:
            done(None)

    def read_page(self, queue, after_message_id, limit, done) -> None:
        done([])

    def close(self) -> None:
        pass
