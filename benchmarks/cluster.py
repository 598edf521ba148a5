"""Several live brokers on one PostgreSQL (issue 19 item 4, docs/scale-out.md section 9):
throughput of 1, 2 and 3 `[ha] mode = "cluster"` nodes on loopback sharing one private
PostgreSQL (fsync on). Each node gets one `hermod perf` run (1 producer, 1 consumer, 1 KiB
durable messages) on a queue of its own, all at once; the figure is the sum of their msg/s.
(`hermod perf` runs its producer and consumer on one URL, so the forwarded case, a producer on
one node and the consumer on the owner, is not measured here.)

    .venv/bin/python benchmarks/cluster.py [--count 20000] [--nodes 1,2,3]

The load average is printed with every line: on a machine with fewer than N+1 free cores the
figure measures CPU contention between the nodes and the database, not the design.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for helper_dir in (ROOT, ROOT / "tests", ROOT / "tests" / "store", ROOT / "tests" / "ha",
                   ROOT / "tests" / "scale"):
    sys.path.insert(0, str(helper_dir))

from cluster_testing import ClusterNode  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402
from pgcluster import PgCluster  # noqa: E402


def create_queue(url: str, address: str) -> None:
    """A receiver's attach creates the queue on that node, which then owns it."""
    connection = BlockingConnection(url, timeout=30)
    try:
        connection.create_receiver(address, credit=0)
    finally:
        connection.close()


def perf(url: str, address: str, count: int, pid: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hermod.broker", "perf", "--url", url,
                             "--address", address, "--count", str(count), "--size", "1024",
                             "--durable", "--json", "--no-progress", "--pid", str(pid)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def measure(pg: PgCluster, nodes: int, count: int) -> list[dict]:
    url = pg.create_database(f"cluster_{nodes}")
    work = Path(tempfile.mkdtemp(prefix="hermod-cluster-bench-"))
    started = [ClusterNode(f"node-{n}", url, work, lease_s=5).start() for n in range(nodes)]
    try:
        urls = [node.wait_ready(120) for node in started]
        for n, node_url in enumerate(urls):  # each node creates, so owns, its queue
            create_queue(node_url, f"perf-{n}")
        runs = [perf(node_url, f"perf-{n}", count, started[n].proc.pid)
                for n, node_url in enumerate(urls)]
        results = []
        for run in runs:
            out, err = run.communicate(timeout=1800)
            if run.returncode != 0:
                raise RuntimeError(f"perf failed: {err.strip().splitlines()[-1:] or out}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for node in started:
            node.kill()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=20000, help="messages per node")
    p.add_argument("--nodes", default="1,2,3")
    args = p.parse_args()
    print(f"cores {os.cpu_count()}, {args.count} x 1 KiB durable messages per node", flush=True)
    with PgCluster(durable=True) as pg:
        for nodes in (int(n) for n in args.nodes.split(",")):
            results = measure(pg, nodes, args.count)
            rates = [r["msg_per_s"] for r in results]
            print(f"{nodes} node(s): {sum(rates):8.0f} msg/s in all  per node "
                  f"{' '.join(f'{r:.0f}' for r in rates)}  load {os.getloadavg()[0]:.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
