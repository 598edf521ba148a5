"""Shared-store HA takeover times (issue 19): `--kills` SIGKILLs of the live broker, each timed
from the kill to the backup's readiness line (the killed node comes back as the next backup),
then the same with `--messages` (default 1M) messages in the store, to show what recovery adds.

    .venv/bin/python benchmarks/ha_takeover.py [--kills 20] [--lease-s 5] [--messages 1000000]

Not part of `make test` (minutes); `make ha-bench` runs it. PostgreSQL: a private cluster
(tests/store/pgcluster.py) with fsync off: brokers are killed, never the server. The 1M messages
are written straight into the store's tables (copies of one message a broker stored), which is
what a backup reads back; sending them through AMQP would only make the run longer.
"""
from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for helper_dir in (ROOT, ROOT / "tests", ROOT / "tests" / "store", ROOT / "tests" / "ha"):
    sys.path.insert(0, str(helper_dir))

import psycopg  # noqa: E402

from ha_testing import BACKUP, HaNode, send_durable  # noqa: E402
from pgcluster import PgCluster  # noqa: E402


def takeovers(url: str, work: Path, kills: int, lease_s: float, label: str) -> list[float]:
    """Kill the live node `kills` times; the seconds from each kill to the backup's readiness."""
    live = HaNode("node-a", url, work, lease_s=lease_s).start()
    live.wait_ready(600)
    backup = HaNode("node-b", url, work, lease_s=lease_s).start()
    backup.wait_line(BACKUP, 60)
    times = []
    try:
        for n in range(kills):
            live.signal(signal.SIGKILL)
            live.proc.wait()
            killed = time.monotonic()
            backup.wait_ready(lease_s + 600)
            times.append(time.monotonic() - killed)
            print(f"{label} kill {n + 1}: takeover {times[-1]:.2f} s", flush=True)
            if n + 1 < kills:
                live, backup = backup, HaNode(live.node, url, work, lease_s=lease_s).start()
                backup.wait_line(BACKUP, 60)
            else:
                live = backup
    finally:
        live.kill()
        backup.kill()
    return times


def fill(cluster: PgCluster, database: str, url: str, work: Path, count: int, lease_s: float) -> None:
    """`count` copies of one stored message on queue `orders`, written in the store's tables."""
    node = HaNode("node-a", url, work, lease_s=lease_s).start()
    try:
        send_durable(node.wait_ready(), ["seed"])
    finally:
        node.kill()
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        connection.execute("""
            INSERT INTO messages (id, address, routing_type, priority, expiration, scheduled_time,
                                  arrival, encoded)
            SELECT m.id + g, m.address, m.routing_type, m.priority, 0, 0, m.arrival, m.encoded
            FROM messages m, generate_series(1, %s) g""", (count - 1,))
        connection.execute("""
            INSERT INTO message_refs (queue_id, message_id, delivery_count)
            SELECT r.queue_id, r.message_id + g, 0 FROM message_refs r, generate_series(1, %s) g""",
                           (count - 1,))
        stored = connection.execute("SELECT count(*) FROM message_refs").fetchone()[0]
    print(f"store filled: {stored} messages", flush=True)


def summary(label: str, times: list[float]) -> str:
    return (f"{label}: kills={len(times)} median={statistics.median(times):.2f}s "
            f"worst={max(times):.2f}s best={min(times):.2f}s")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--lease-s", type=float, default=5)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--full-kills", type=int, default=3, help="kills with the full store")
    args = p.parse_args()
    lines = []
    with PgCluster(durable=False) as cluster, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = cluster.create_database("ha_empty")
        lines.append(summary(f"empty store, lease_s={args.lease_s:g}",
                             takeovers(url, work, args.kills, args.lease_s, "empty")))
        if args.messages > 0:
            url = cluster.create_database("ha_full")
            fill(cluster, "ha_full", url, work, args.messages, args.lease_s)
            lines.append(summary(f"{args.messages} messages, lease_s={args.lease_s:g}",
                                 takeovers(url, work, args.full_kills, args.lease_s, "full")))
    for line in lines:
        print("summary " + line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
