"""The journal's work items: a unit of operations, a unit of parts (one producer link's sends of a
reactor turn, stored together and decided one by one only after a fault), and a page read. The
writer thread (`store.journal.SqlJournal`) holds them in its queue in submission order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from hermod.broker.core.ports import Operation, StoredReference

from .outages import Unreachable

Done = Callable[[BaseException | None], None]
PageDone = Callable[[list[StoredReference] | BaseException], None]


@dataclass(slots=True)
class Unit:
    ops: Sequence[Operation]
    done: Done | None
    submitted: float  # time.monotonic()
    parts: Parts | None = None  # a unit of parts (`open_unit`); None: a plain unit


# A unit of parts stops taking more at this many operations (a turn's burst of a link is at most
# its credit, 1000 messages, but a message may have a reference per queue of a wide address).
PARTS_MAX_OPS = 4096


class Parts:
    """The parts of a unit opened with `open_unit`: where each ends in the unit's ops, and the
    outcomes of those already decided one by one (`split`). `finish` is the unit's
    `done` as the writer sees it: it hands the owner one outcome per part when they differ."""

    __slots__ = ("ends", "outcomes", "done")

    def __init__(self, end: int, done: Callable[[object], None]) -> None:
        self.ends = [end]  # after each undecided part, its end in the unit's ops
        self.outcomes: list[BaseException | None] = []  # the decided parts', in order
        self.done = done

    def finish(self, error: BaseException | None) -> None:
        """The undecided parts all ended with `error` (None: stored)."""
        if self.outcomes:
            self.done(self.outcomes + [error] * len(self.ends))
        else:
            self.done(error)


@dataclass(slots=True)
class Read:
    queue: str
    after: int
    limit: int
    done: PageDone


def split(unit: Unit, commit: Callable[[Unit], None], failed: Callable[[BaseException], None]) -> None:
    """Apply `unit`'s undecided parts one transaction each (`commit`), in order, keeping each
    outcome (`failed` hears of each fault). An outage raises `Unreachable` with the unit trimmed
    to what is still undecided: the writer retries that, and parts already stored are not
    written twice."""
    parts = unit.parts
    assert parts is not None
    ops, ends, start, decided = unit.ops, parts.ends, 0, 0
    try:
        for end in ends:
            part = ops[start:end]
            try:
                commit(Unit(part, None, unit.submitted))
            except Unreachable:
                raise
            except Exception as part_error:
                failed(part_error)
                parts.outcomes.append(part_error)
            else:
                parts.outcomes.append(None)
            decided += 1
            start = end
    finally:
        if decided:
            unit.ops = ops[start:]
            parts.ends = [end - start for end in ends[decided:]]
