"""Store benchmark: durable 1 KiB messages through the journal, as the broker drives it.

A producer keeps up to --window units in flight (AddMessage + AddReference each, like a sender
with that much link credit waiting for `accepted`), then a consumer acknowledges every message
(DeleteReference units, same window). A last phase sends with window 1 (a producer that waits
for each acceptance): that measures the latency of a single commit. Completions come back
through a queue drained by the main thread, standing in for the reactor loop.

Back-ends: SQLite with synchronous FULL and NORMAL (files in a temp dir) and PostgreSQL (a
private cluster with fsync on, started with initdb/pg_ctl like the tests; or --pg-url).

    .venv/bin/python benchmarks/store_bench.py [--count 20000] [--window 256] [--size 1024]
"""
from __future__ import annotations

import argparse
import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "store"))

from hermod import store  # noqa: E402
from hermod.broker.core.ports import (  # noqa: E402
    AddMessage,
    AddReference,
    AddressRecord,
    DeleteReference,
    MessageRecord,
    PutAddress,
    PutQueue,
    QueueRecord,
)


class Reactor:
    """The stand-in for the broker's loop: completions are posted here and run in order."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()

    def post(self, callback: Callable, *args: object) -> None:
        self._queue.put((callback, args))

    def run_one(self) -> None:
        callback, args = self._queue.get(timeout=120)
        callback(*args)


def drive(journal, reactor: Reactor, units: Iterator[list], total: int, window: int) -> float:
    """Submit `total` units keeping `window` in flight; returns the elapsed seconds."""
    state = {"submitted": 0, "completed": 0}

    def done(error: BaseException | None) -> None:
        if error is not None:
            raise SystemExit(f"store error: {error}")
        state["completed"] += 1
        submit_next()

    def submit_next() -> None:
        if state["submitted"] < total:
            state["submitted"] += 1
            journal.submit(next(units), done)

    started = time.perf_counter()
    for _ in range(min(window, total)):
        submit_next()
    while state["completed"] < total:
        reactor.run_one()
    return time.perf_counter() - started


def phase(name: str, url: str, synchronous: str, units: Iterator[list], total: int,
          window: int) -> dict:
    reactor = Reactor()
    journal = store.open_journal(url, reactor.post, sqlite_synchronous=synchronous)
    try:
        elapsed = drive(journal, reactor, units, total, window)
        stats = journal.stats()
    finally:
        journal.close()
    return {"phase": name, "units": total, "seconds": elapsed, "rate": total / elapsed,
            "stats": stats}


def run_backend(label: str, url: str, synchronous: str, count: int, window: int,
                size: int, sync_count: int) -> list[dict]:
    body = b"m" * size
    setup = [PutAddress(AddressRecord("bench", frozenset({"anycast"}))),
             PutQueue(QueueRecord(name="bench", address="bench", routing_type="anycast"))]
    reactor = Reactor()
    journal = store.open_journal(url, reactor.post, sqlite_synchronous=synchronous)
    drive(journal, reactor, iter([setup]), 1, 1)
    journal.close()

    def produce(first: int) -> Iterator[list]:
        message_id = first
        while True:
            yield [AddMessage(MessageRecord(id=message_id, address="bench", encoded=body,
                                            routing_type="anycast", arrival=int(time.time() * 1000))),
                   AddReference("bench", message_id)]
            message_id += 1

    def consume(first: int) -> Iterator[list]:
        message_id = first
        while True:
            yield [DeleteReference("bench", message_id)]
            message_id += 1

    results = [
        phase("produce", url, synchronous, produce(1), count, window),
        phase("consume", url, synchronous, consume(1), count, window),
        phase("produce w=1", url, synchronous, produce(count + 1), sync_count, 1),
    ]
    for result in results:
        result["backend"] = label
    return results


def report(results: list[dict]) -> None:
    print(f"{'backend':<18} {'phase':<12} {'units':>7} {'units/s':>9} {'commits':>8} "
          f"{'units/commit min/avg/max':>26} {'commit ms avg/max':>18}")
    for r in results:
        s = r["stats"]
        batch = (f"{s.min_units_per_commit}/{s.avg_units_per_commit:.1f}/"
                 f"{s.max_units_per_commit}")
        latency = (f"{1000 * s.commit_seconds_total / max(s.commits, 1):.2f}/"
                   f"{1000 * s.commit_seconds_max:.2f}")
        print(f"{r['backend']:<18} {r['phase']:<12} {r['units']:>7} {r['rate']:>9.0f} "
              f"{s.commits:>8} {batch:>26} {latency:>18}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="messages per phase")
    parser.add_argument("--window", type=int, default=256, help="units in flight")
    parser.add_argument("--size", type=int, default=1024, help="message bytes")
    parser.add_argument("--sync-count", type=int, default=300,
                        help="messages sent with window 1")
    parser.add_argument("--backends", default="sqlite-full,sqlite-normal,postgresql")
    parser.add_argument("--pg-url", help="an empty PostgreSQL database to use instead of a "
                                         "private cluster")
    args = parser.parse_args(argv)
    wanted = args.backends.split(",")
    results: list[dict] = []
    print(f"{args.count} durable {args.size}-byte messages, window {args.window}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hermod-bench-") as tmp:
        for mode in ("FULL", "NORMAL"):
            if f"sqlite-{mode.lower()}" in wanted:
                url = f"sqlite:///{tmp}/bench-{mode.lower()}.db"
                found = run_backend(f"sqlite {mode}", url, mode, args.count, args.window,
                                    args.size, args.sync_count)
                report(found)
                results += found
        if "postgresql" in wanted:
            if args.pg_url:
                found = run_backend("postgresql", args.pg_url, "FULL", args.count, args.window,
                                    args.size, args.sync_count)
            else:
                from pgcluster import PgCluster, find_bindir

                if find_bindir() is None:
                    print("postgresql: server binaries not installed, skipped")
                    found = []
                else:
                    with PgCluster(durable=True) as cluster:
                        url = cluster.create_database("bench")
                        found = run_backend("postgresql", url, "FULL", args.count,
                                            args.window, args.size, args.sync_count)
            report(found)
            results += found
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
