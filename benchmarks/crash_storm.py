"""The crash storm, long version (issue 12): `--kills` SIGKILLs of the broker per back-end during
mixed durable traffic (durable queue, durable subscription, transactions, a divert, a virtual
topic, dead letters), with the checks of tests/durable/crash_storm.py after every restart and at
the end. Prints one line per round and a summary line per back-end; exits 1 on any loss,
acknowledged redelivery or duplicate beyond what was in doubt.

    .venv/bin/python benchmarks/crash_storm.py [--kills 50] [--backend sqlite postgresql]
        [--batch 40] [--seed 12]

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

from crash_storm import Storm, format_report  # noqa: E402
from durable_clients import DurableBrokers, ProcessStarter  # noqa: E402
from pgcluster import PgCluster  # noqa: E402


def storm_on(store_url: str, work: Path, args) -> dict:
    starter = ProcessStarter(work)
    brokers = DurableBrokers(starter.start, store_url)
    start = time.monotonic()
    try:
        storm = Storm(brokers, args.seed, batch=args.batch, log=lambda line: print(line, flush=True))
        report = storm.run(args.kills)
    finally:
        starter.stop_all()
    print(f"summary {format_report(report)} secs={time.monotonic() - start:.0f}", flush=True)
    return report


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--batch", type=int, default=40, help="new messages per source per round")
    p.add_argument("--seed", default="12")
    p.add_argument("--backend", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"])
    args = p.parse_args()
    failed = False
    for backend in args.backend:
        work = Path(tempfile.mkdtemp(prefix=f"hermod-crash-storm-{backend}-"))
        if backend == "sqlite":
            report = storm_on(f"sqlite:///{work / 'hermod.db'}", work, args)
        else:
            with PgCluster(durable=False) as cluster:
                report = storm_on(cluster.create_database("hermod_storm"), work, args)
        failed |= bool(report["losses"] or report["redelivered_after_ack"]
                       or report["duplicates_beyond_in_doubt"])
        for key in ("losses", "redelivered_after_ack", "duplicates_beyond_in_doubt"):
            if report[key]:
                print(f"{backend} {key}: {report[key]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
