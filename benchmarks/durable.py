"""Durable throughput (issue 3): 1 KiB durable messages, 1 producer -> 1 consumer on one
queue (`hermod perf --scenario q1d`), through the broker on SQLite (synchronous FULL and NORMAL)
and on a private PostgreSQL cluster (fsync on), measured side by side; reports msgs/s, broker
CPU per 100k, the broker's RSS at the end and the group commit batch sizes the journal saw.

    .venv/bin/python benchmarks/durable.py [--count 20000] [--only sqlite-full,postgresql]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "store"))

from hermod.broker.tools.clients import management_call  # noqa: E402
from pgcluster import PgCluster  # noqa: E402


def run(name: str, config: str, count: int) -> str:
    work = Path(tempfile.mkdtemp(prefix="hermod-durable-"))
    (work / "hermod.toml").write_text(config)
    broker = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--config",
                               str(work / "hermod.toml"), "--log-level", "warning"],
                              stdout=subprocess.PIPE, text=True, cwd=work)
    try:
        found = None
        while found is None:  # the readiness line (an http line may come first)
            line = broker.stdout.readline()
            if not line:
                raise RuntimeError(f"{name}: the broker exited before listening")
            found = re.search(r"listening on (amqp://\S+)", line)
        url = found.group(1)
        perf = subprocess.run([sys.executable, "-m", "hermod.broker", "perf", "--scenario", "q1d", "--url", url,
                               "--count", str(count), "--size", "1024", "--pid", str(broker.pid), "--json",
                               "--no-progress"], capture_output=True, text=True, timeout=900)
        try:
            res = json.loads(perf.stdout.strip().splitlines()[-1])
            line = " ".join(f"{k}={res.get(k)}" for k in ("msg_per_s", "cpu_s_per_100k", "rss_mib"))
        except (ValueError, IndexError):
            line = perf.stderr.strip() or perf.stdout.strip()
        stats = management_call(url, "store.stat")
        return f"{name:<16} {line}\n{'':<16} journal: {stats.get('summary', '-')}"
    finally:
        broker.terminate()
        broker.wait(60)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = p.parse_args()
    only = set(filter(None, args.only.split(",")))
    with PgCluster(durable=True) as pg:
        cases = {
            "sqlite-full": '[store]\nurl = "sqlite:///hermod.db"\n',
            "sqlite-normal": '[store]\nurl = "sqlite:///hermod.db"\nsqlite_synchronous = "NORMAL"\n',
            "postgresql": f'[store]\nurl = "{pg.create_database("bench")}"\n',
        }
        for name, config in cases.items():
            if only and name not in only:
                continue
            print(f"load {os.getloadavg()[0]:.2f}", end="  ")
            print(run(name, config, args.count), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
