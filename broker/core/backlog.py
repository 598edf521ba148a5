"""The messages waiting on a queue, and those not yet due.

`Backlog` keeps one FIFO per message priority (0-9): dispatch takes from the highest non-empty
priority, in arrival order within it. Messages returned by consumers go back to their place
(ordered by message id), ahead of later arrivals.

`Schedule` holds messages whose delivery time has not come (scheduled delivery, redelivery
delay) in a heap by due time.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from .queue import Ref

LEVELS = 10


class Backlog:
    __slots__ = ("levels", "count", "top")

    def __init__(self) -> None:
        self.levels: list[deque[Ref]] = [deque() for _ in range(LEVELS)]
        self.count = 0
        self.top = -1  # highest level that may be non-empty

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def append(self, ref: Ref) -> None:
        p = ref.message.priority
        self.levels[p].append(ref)
        self.count += 1
        if p > self.top:
            self.top = p

    def popleft(self) -> Ref:
        levels = self.levels
        top = self.top
        while not levels[top]:
            top -= 1
        self.top = top
        self.count -= 1
        return levels[top].popleft()

    def peek(self) -> Ref:
        levels = self.levels
        top = self.top
        while not levels[top]:
            top -= 1
        self.top = top
        return levels[top][0]

    def __iter__(self) -> Iterator[Ref]:
        """Dispatch order: priority high to low, arrival order within a priority."""
        for p in range(self.top, -1, -1):
            yield from self.levels[p]

    def restore(self, refs: list[Ref]) -> None:
        """Put refs back in their place (by message id), ahead of later arrivals."""
        by_level: dict[int, list[Ref]] = {}
        for ref in refs:
            by_level.setdefault(ref.message.priority, []).append(ref)
        for p, group in by_level.items():
            group.sort()
            level = self.levels[p]
            if not level or group[-1].message.id < level[0].message.id:
                level.extendleft(reversed(group))
            else:
                self.levels[p] = deque(heapq.merge(group, level))
            if p > self.top:
                self.top = p
        self.count += len(refs)

    def remove(self, ref: Ref) -> bool:
        try:
            self.levels[ref.message.priority].remove(ref)
        except ValueError:
            return False
        self.count -= 1
        return True

    def remove_where(self, predicate) -> list[Ref]:
        """Remove every ref `predicate` holds for, in one pass (management purge/move)."""
        taken: list[Ref] = []
        for p, level in enumerate(self.levels):
            if not level:
                continue
            kept: deque[Ref] = deque()
            for ref in level:
                (taken if predicate(ref) else kept).append(ref)
            self.levels[p] = kept
        self.count -= len(taken)
        return taken

    def clear(self) -> None:
        for level in self.levels:
            level.clear()
        self.count = 0
        self.top = -1


class Schedule:
    """Refs not due yet, by due time (epoch ms)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Ref]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, due: int, ref: Ref) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, ref))

    def next_due(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> list[Ref]:
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[2])
        return out

    def remove(self, ref: Ref) -> bool:
        for i, item in enumerate(self._heap):
            if item[2] is ref:
                self._heap[i] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                return True
        return False

    def __iter__(self) -> Iterator[Ref]:
        return (item[2] for item in self._heap)

    def remove_where(self, predicate) -> list[Ref]:
        taken: list[Ref] = []
        kept = []
        for item in self._heap:
            (taken.append(item[2]) if predicate(item[2]) else kept.append(item))
        if taken:
            self._heap = kept
            heapq.heapify(kept)
        return taken

    def clear(self) -> None:
        self._heap.clear()
