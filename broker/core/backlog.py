"""The messages waiting on a queue, and those not yet due.

`Backlog` keeps one FIFO per message priority (0-9): dispatch takes from the highest non-empty
priority, in arrival order within it. Messages returned by consumers go back to their place
(ordered by message id), ahead of later arrivals.

Refs that no consumer of the queue takes (selectors that match nothing, refusals) are *parked*
(`Parked`): each consumer remembers how far it has looked through them, so a dispatch pass
looks only at what is new to a consumer, never again at a million messages its selector
already turned down. A returned message goes back among the live ones and is seen again.

Removing a ref from anywhere (reject, dead letter, expiry, last-value replacement) leaves a
tombstone: O(1), with the dead entries skipped on the way and compacted away in bulk.

`Schedule` holds messages whose delivery time has not come (scheduled delivery, redelivery
delay) in a heap by due time, with the same lazy removal.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import TYPE_CHECKING, Iterator, cast

if TYPE_CHECKING:
    from .queue import Ref

LEVELS = 10

# A priority level no message has used yet. An empty deque costs ~760 bytes (its first block),
# ten of them most of a queue's memory: 100,000 idle subscriptions held 0.75 GB of empty FIFOs.
# The placeholder iterates and tests false like an empty deque; `append` meets its
# AttributeError once and makes the level's deque then.
_UNUSED = cast("deque", ())

# Ref.in_level: where the ref stands with the live FIFOs.
OUT, LIVE, DEAD = 0, 1, 2  # DEAD: removed, its entry is still in a FIFO (a tombstone)

_tokens = itertools.count(1)


class Parked:
    """Refs no consumer took, in the order they were parked. Entries are (token, ref); an entry
    is live while `ref.parked_token` is its token. Positions are absolute indices (they survive
    trimming the head), one per consumer: everything before a consumer's position it has seen
    and turned down."""

    __slots__ = ("entries", "head", "base", "live", "positions")

    def __init__(self) -> None:
        self.entries: list[tuple[int, Ref]] = []
        self.head = 0  # entries before this index are gone
        self.base = 0  # absolute index of entries[0]
        self.live = 0
        self.positions: dict[int, int] = {}  # consumer id -> absolute index

    @property
    def start(self) -> int:
        return self.base + self.head

    @property
    def end(self) -> int:
        return self.base + len(self.entries)

    def park(self, ref: Ref) -> int:
        token = next(_tokens)
        ref.parked_token = token
        self.entries.append((token, ref))
        self.live += 1
        return self.end - 1

    def at(self, index: int) -> Ref | None:
        """The live ref at an absolute index, or None (a tombstone)."""
        token, ref = self.entries[index - self.base]
        return ref if ref.parked_token == token else None

    def remove(self, ref: Ref) -> bool:
        if not ref.parked_token:
            return False
        ref.parked_token = 0
        self.live -= 1
        self._tidy()
        return True

    def position(self, consumer_id: int) -> int:
        return max(self.positions.get(consumer_id, 0), self.start)

    def _tidy(self) -> None:
        entries = self.entries
        while self.head < len(entries):
            token, ref = entries[self.head]
            if ref.parked_token == token:
                break
            self.head += 1
        dead = len(entries) - self.head - self.live
        if self.head > 1024 and self.head * 2 > len(entries):
            self.base += self.head
            del entries[:self.head]
            self.head = 0
        if dead > 1024 and dead > self.live:
            self._compact()

    def _compact(self) -> None:
        """Drop the tombstones; each consumer keeps its place among the live entries."""
        kept: list[tuple[int, Ref]] = []
        order = sorted(self.positions.items(), key=lambda kv: kv[1])
        moved: dict[int, int] = {}
        k = 0
        for i in range(self.head, len(self.entries)):
            absolute = self.base + i
            while k < len(order) and order[k][1] <= absolute:
                moved[order[k][0]] = len(kept)
                k += 1
            token, ref = self.entries[i]
            if ref.parked_token == token:
                kept.append((token, ref))
        for cid, _ in order[k:]:
            moved[cid] = len(kept)
        self.entries = kept
        self.base = self.head = 0
        self.positions = moved

    def __iter__(self) -> Iterator[Ref]:
        for token, ref in self.entries[self.head:]:
            if ref.parked_token == token:
                yield ref

    def clear(self) -> None:
        for token, ref in self.entries[self.head:]:
            if ref.parked_token == token:
                ref.parked_token = 0
        self.entries = []
        self.head = self.base = self.live = 0
        self.positions.clear()


class Backlog:
    __slots__ = ("levels", "count", "top", "parked", "dead")

    def __init__(self) -> None:
        self.levels: list[deque[Ref]] = [_UNUSED] * LEVELS  # made on first use (`append`)
        self.count = 0  # live refs in the FIFOs (parked ones not included)
        self.top = -1  # highest level that may be non-empty
        self.parked = Parked()
        self.dead = 0  # tombstones in the FIFOs

    def __len__(self) -> int:
        return self.count + self.parked.live

    def __bool__(self) -> bool:
        return self.count > 0 or self.parked.live > 0

    @property
    def live(self) -> int:
        """Refs not parked: what a plain dispatch pass can take."""
        return self.count

    def append(self, ref: Ref) -> None:
        if ref.in_level == DEAD:
            self._purge(ref)
        p = ref.message.envelope.priority  # `Message.priority`, inline
        if p > 9:
            p = 9
        try:
            self.levels[p].append(ref)
        except AttributeError:  # the level's first message (`_UNUSED`)
            self.levels[p] = deque((ref,))
        ref.in_level = LIVE
        self.count += 1
        if p > self.top:
            self.top = p

    def _purge(self, ref: Ref) -> None:
        """A ref coming back while its tombstone is still in a FIFO: drop the tombstone (rare:
        a dead-letter move the store refused)."""
        self.levels[ref.message.priority].remove(ref)
        self.dead -= 1
        ref.in_level = OUT

    def _head(self) -> deque:
        """The FIFO holding the next live ref, with tombstones in front of it dropped."""
        levels = self.levels
        top = self.top
        while True:
            level = levels[top]
            while level and level[0].in_level != LIVE:
                level.popleft().in_level = OUT
                self.dead -= 1
            if level:
                self.top = top
                return level
            top -= 1

    def popleft(self) -> Ref:
        ref = self._head().popleft()
        ref.in_level = OUT
        self.count -= 1
        return ref

    def take(self, n: int) -> list[Ref]:
        """Up to `n` refs from the head, in dispatch order: `popleft` n times in one call."""
        out: list[Ref] = []
        append = out.append
        while n > 0 and self.count:
            level = self._head()
            popleft = level.popleft
            taken = 0
            while taken < n and level and level[0].in_level == LIVE:
                ref = popleft()
                ref.in_level = OUT
                append(ref)
                taken += 1
            self.count -= taken
            n -= taken
        return out

    def peek(self) -> Ref:
        return self._head()[0]

    def __iter__(self) -> Iterator[Ref]:
        """Dispatch order: priority high to low, arrival order within a priority; then the
        parked refs."""
        for p in range(self.top, -1, -1):
            for ref in self.levels[p]:
                if ref.in_level == LIVE:
                    yield ref
        yield from self.parked

    def restore(self, refs: list[Ref]) -> None:
        """Put refs back in their place (by message id), ahead of later arrivals."""
        by_level: dict[int, list[Ref]] = {}
        for ref in refs:
            if ref.in_level == DEAD:
                self._purge(ref)
            ref.in_level = LIVE
            by_level.setdefault(ref.message.priority, []).append(ref)
        for p, group in by_level.items():
            group.sort()
            level = self.levels[p]
            if not level:
                self.levels[p] = deque(group)
            elif group[-1].message.id < level[0].message.id:
                level.extendleft(reversed(group))
            else:
                self.levels[p] = deque(heapq.merge(group, level))
            if p > self.top:
                self.top = p
        self.count += len(refs)

    def park(self, ref: Ref) -> int:
        """Set aside a ref (popped from the FIFOs) that no consumer takes now."""
        return self.parked.park(ref)

    def remove(self, ref: Ref) -> bool:
        """Take a waiting ref out, wherever it is: O(1) (a tombstone)."""
        if ref.in_level == LIVE:
            ref.in_level = DEAD
            self.count -= 1
            self.dead += 1
            if self.dead > 1024 and self.dead > self.count:
                self._compact()
            return True
        return self.parked.remove(ref)

    def _compact(self) -> None:
        for p, level in enumerate(self.levels):
            if level:
                for ref in level:
                    if ref.in_level == DEAD:
                        ref.in_level = OUT
                self.levels[p] = deque(r for r in level if r.in_level == LIVE)
        self.dead = 0

    def remove_where(self, predicate) -> list[Ref]:
        """Remove every ref `predicate` holds for, parked ones too, in one pass (management
        purge/move); in dispatch order by priority, then by message id. Tombstones go on the
        way (they are not refs of the queue any more)."""
        taken: list[Ref] = []
        for p in range(LEVELS - 1, -1, -1):  # dispatch order: the highest priority first
            level = self.levels[p]
            if not level:
                continue
            kept: deque[Ref] = deque()
            for ref in level:
                if ref.in_level != LIVE:
                    ref.in_level = OUT
                elif predicate(ref):
                    ref.in_level = OUT
                    taken.append(ref)
                else:
                    kept.append(ref)
            self.levels[p] = kept
        self.count -= len(taken)
        self.dead = 0
        parked = [ref for ref in self.parked if predicate(ref)]
        if parked:
            for ref in parked:
                self.parked.remove(ref)
            taken.extend(parked)
            taken.sort(key=lambda ref: (-ref.message.priority, ref.message.id))
        return taken

    def clear(self) -> None:
        for level in self.levels:
            if level:
                for ref in level:
                    ref.in_level = OUT
                level.clear()
        self.count = 0
        self.dead = 0
        self.top = -1
        self.parked.clear()


class Schedule:
    """Refs not due yet, by due time (epoch ms). Removal marks the entry dead (O(1))."""

    __slots__ = ("_heap", "_seq", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Ref]] = []
        self._seq = 0
        self._live: dict[int, int] = {}  # id(ref) -> seq of its live entry

    def __len__(self) -> int:
        return len(self._live)

    def add(self, due: int, ref: Ref) -> None:
        self._seq += 1
        self._live[id(ref)] = self._seq
        heapq.heappush(self._heap, (due, self._seq, ref))

    def _drop_dead(self) -> None:
        heap, live = self._heap, self._live
        while heap and live.get(id(heap[0][2])) != heap[0][1]:
            heapq.heappop(heap)

    def next_due(self) -> int | None:
        self._drop_dead()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> list[Ref]:
        out = []
        heap, live = self._heap, self._live
        while heap and heap[0][0] <= now:
            _, seq, ref = heapq.heappop(heap)
            if live.get(id(ref)) == seq:
                del live[id(ref)]
                out.append(ref)
        return out

    def remove(self, ref: Ref) -> bool:
        if self._live.pop(id(ref), None) is None:
            return False
        if len(self._heap) > 1024 and len(self._heap) > 2 * len(self._live):
            self._heap = [e for e in self._heap if self._live.get(id(e[2])) == e[1]]
            heapq.heapify(self._heap)
        return True

    def __iter__(self) -> Iterator[Ref]:
        live = self._live
        return (ref for _, seq, ref in self._heap if live.get(id(ref)) == seq)

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
        self._live.clear()
