"""The crash storm, long version (issue 12; cluster mode and a bridge: issue 28): `--kills`
SIGKILLs per back-end and mode during mixed durable traffic (durable queue, durable
subscription, transactions, a divert, a virtual topic, dead letters), with the checks of
tests/durable/crash_storm.py after every restart and at the end. Prints one line per round and
a summary line per back-end and mode, then the table; exits 1 on any loss or acknowledged
redelivery, or (one broker) a duplicate beyond what was in doubt.

Modes (tests/durable/storm_topologies.py):
- `single`: one broker on the store, killed and restarted;
- `cluster` (PostgreSQL only): two cluster nodes; producers send to one, which forwards every
  message to the other, which owns the queues; the kills take the owner and the entry node
  in turns;
- `bridge`: producers send to a local broker whose queue a [[bridge]] forwards to a remote
  broker, where the consumer reads; the kills take the local and the remote broker in turns.
  A bridge forwards at least once: its duplicates (the unconfirmed window at a kill) are
  reported, not failed. In cluster mode too: a copy the owner stored before it died, whose
  send was refused to the producer, is sent again.

    .venv/bin/python benchmarks/crash_storm.py [--kills 50] [--backend sqlite postgresql]
        [--mode single cluster bridge] [--batch 40] [--seed 12]

Not part of `make test` (minutes); `make crash-storm` runs it. PostgreSQL: a private cluster
(tests/store/pgcluster.py) with fsync off: the broker is killed, never the server.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for helper_dir in (ROOT, ROOT / "tests", ROOT / "tests" / "wire", ROOT / "tests" / "store",
                   ROOT / "tests" / "durable"):
    sys.path.insert(0, str(helper_dir))

from crash_storm import Sink, Source, Storm, format_report  # noqa: E402
from durable_clients import DurableBrokers, ProcessStarter  # noqa: E402
from pgcluster import PgCluster  # noqa: E402
from storm_topologies import BRIDGE_SINK, BRIDGE_SOURCE, BridgedBrokers, ClusterBrokers  # noqa: E402


def bridge_streams():
    return [Source("bridge", BRIDGE_SOURCE)], [Sink("bridged", BRIDGE_SINK, BRIDGE_SINK, "bridge")]


def storm_on(brokers, args, streams=None, cleanup=None) -> dict:
    start = time.monotonic()
    try:
        storm = Storm(brokers, args.seed, batch=args.batch, streams=streams,
                      log=lambda line: print(line, flush=True))
        report = storm.run(args.kills, until=args.until)
    finally:
        if cleanup is not None:
            cleanup()
    report["secs"] = time.monotonic() - start
    print(f"summary {format_report(report)} secs={report['secs']:.0f}", flush=True)
    return report


def run_mode(backend: str, mode: str, work: Path, args, store) -> dict | None:
    """One storm; `store(name)` makes a store URL of the back-end."""
    if mode == "single":
        starter = ProcessStarter(work)
        return storm_on(DurableBrokers(starter.start, store("hermod_storm")), args, cleanup=starter.stop_all)
    if mode == "cluster":
        if backend != "postgresql":
            return None  # cluster mode is PostgreSQL's
        brokers = ClusterBrokers(store("hermod_cluster_storm"), work)
        return storm_on(brokers, args, cleanup=brokers.kill_all)
    bridged = BridgedBrokers(store("hermod_bridge_local"), store("hermod_bridge_remote"), work, backend)
    return storm_on(bridged, args, streams=bridge_streams(), cleanup=bridged.stop)


def table(rows: list[tuple[str, str, dict]]) -> str:
    lines = ["| back-end | mode | kills | sent | accepted | received | lost | acked redelivered "
             "| duplicates (beyond in doubt) |", "|---|---|---|---|---|---|---|---|---|"]
    for backend, mode, r in rows:
        lost = sum(len(v) for v in r["losses"].values())
        again = sum(len(v) for v in r["redelivered_after_ack"].values())
        beyond = sum(len(v) for v in r["duplicates_beyond_in_doubt"].values())
        lines.append(f"| {backend} | {mode} | {r['kills']} | {r['sent']} | {r['accepted']} | "
                     f"{r['received']} | {lost} | {again} | {r.get('duplicates', 0)} ({beyond}) |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--batch", type=int, default=40, help="new messages per source per round")
    p.add_argument("--seed", default="12")
    p.add_argument("--until", type=float, default=None,
                   help="a time.time(): no kill round starts after it (fewer kills on a busy machine)")
    p.add_argument("--backend", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"])
    p.add_argument("--mode", nargs="+", choices=("single", "cluster", "bridge"),
                   default=["single", "cluster", "bridge"])
    args = p.parse_args()
    failed = False
    rows = []
    for backend in args.backend:
        for mode in args.mode:
            work = Path(tempfile.mkdtemp(prefix=f"hermod-crash-storm-{backend}-{mode}-"))
            if backend == "sqlite":
                report = run_mode(backend, mode, work, args, lambda name: f"sqlite:///{work / name}.db")
            else:
                with PgCluster(durable=False) as cluster:
                    report = run_mode(backend, mode, work, args, cluster.create_database)
            if report is None:
                continue
            rows.append((backend, mode, report))
            failed |= bool(report["losses"] or report["redelivered_after_ack"]
                           or (mode == "single" and report["duplicates_beyond_in_doubt"]))
            for key in ("losses", "redelivered_after_ack", "duplicates_beyond_in_doubt"):
                if report[key]:
                    print(f"{backend} {mode} {key}: {report[key]}", flush=True)
    print(table(rows), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
