"""Counters the journal keeps so the broker (management, `hermod queue stat`, perf) can report
how well group commit works: commits, and units and ops per commit."""
from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JournalStats:
    commits: int = 0
    units: int = 0  # units committed
    ops: int = 0  # operations committed
    min_units_per_commit: int = 0
    max_units_per_commit: int = 0
    min_ops_per_commit: int = 0
    max_ops_per_commit: int = 0
    commit_seconds_total: float = 0.0
    commit_seconds_max: float = 0.0
    failed_units: int = 0  # done(error): the unit itself could not be applied
    expired_units: int = 0  # done(StoreUnavailable): the database stayed away too long
    retries: int = 0  # transaction attempts that failed on an unreachable database
    outages: int = 0
    pages_read: int = 0
    idempotent_commits: int = 0  # transactions with ON CONFLICT inserts (replays, store.journal)

    @property
    def avg_units_per_commit(self) -> float:
        return self.units / self.commits if self.commits else 0.0

    @property
    def avg_ops_per_commit(self) -> float:
        return self.ops / self.commits if self.commits else 0.0

    def summary(self) -> str:
        return (f"commits={self.commits} units={self.units} ops={self.ops} "
                f"units/commit min={self.min_units_per_commit} "
                f"avg={self.avg_units_per_commit:.1f} max={self.max_units_per_commit} "
                f"ops/commit min={self.min_ops_per_commit} avg={self.avg_ops_per_commit:.1f} "
                f"max={self.max_ops_per_commit} failed={self.failed_units} "
                f"expired={self.expired_units} retries={self.retries}")


class StatsCounter:
    """Updated by the writer thread, read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(
            (name for name in JournalStats.__slots__ if not name.startswith("commit_seconds")), 0)
        self._seconds_total = 0.0
        self._seconds_max = 0.0

    def commit(self, units: int, ops: int, seconds: float) -> None:
        with self._lock:
            f = self._counts
            first = f["commits"] == 0
            f["commits"] += 1
            f["units"] += units
            f["ops"] += ops
            f["min_units_per_commit"] = units if first else min(f["min_units_per_commit"], units)
            f["max_units_per_commit"] = max(f["max_units_per_commit"], units)
            f["min_ops_per_commit"] = ops if first else min(f["min_ops_per_commit"], ops)
            f["max_ops_per_commit"] = max(f["max_ops_per_commit"], ops)
            self._seconds_total += seconds
            self._seconds_max = max(self._seconds_max, seconds)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def snapshot(self) -> JournalStats:
        with self._lock:
            return JournalStats(**self._counts, commit_seconds_total=self._seconds_total,
                                commit_seconds_max=self._seconds_max)
