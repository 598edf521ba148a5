"""How routing fan-out costs grow (issue 5): messages per second accepted into an address with
0, 1 and 10 non-exclusive diverts (each to its own queue), and into a virtual topic with 10
consumer groups, measured side by side in one run. In-memory store, 1 KiB non-durable bodies,
one producer, nobody consuming (the cost measured is routing and enqueueing).

    .venv/bin/python benchmarks/fanout.py [--count 30000] [--reps 3]
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hermod.broker.tools.perfclient import Client, Consumer, Producer, encode_message  # noqa: E402
from hermod.broker.tools.perfrun import process_tree  # noqa: E402


def diverts_config(n: int) -> str:
    return "".join(f"""
[[divert]]
name = "d{i}"
address = "fan"
forwarding_address = "fan.copy{i}"
""" for i in range(n))


CASES = {
    "diverts-0": (diverts_config(0), "fan", []),
    "diverts-1": (diverts_config(1), "fan", []),
    "diverts-10": (diverts_config(10), "fan", []),
    "virtual-topic-10-groups": ("", "topic://VirtualTopic.Fan",
                                [f"Consumer.G{i}.VirtualTopic.Fan" for i in range(10)]),
}


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in process_tree(pid):
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / 100.0
    return total


def run_case(config: str, address: str, groups: list[str], count: int) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix="hermod-fanout-"))
    (work / "hermod.toml").write_text(config)
    broker = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", "memory",
                               "--config", str(work / "hermod.toml"), "--log-level", "warning"],
                              stdout=subprocess.PIPE, text=True, cwd=work)
    try:
        port = None
        for line in broker.stdout:  # readiness lines: the HTTP listener's may come first
            if m := re.search(r"hermod listening on amqp://[^ ]*:(\d+)", line):
                port = int(m.group(1))
                break
        if port is None:
            raise SystemExit("the broker exited before its AMQP readiness line")
        client = Client("127.0.0.1", port)
        deadline = time.monotonic() + 600
        for name in groups:  # a consumer makes each group's queue, then leaves (it keeps collecting)
            c = Consumer(client.connect(name), name, 0, record_latency=False)
            client.wait_for(lambda: c.opened, deadline, "group attach")
        producer = Producer(client.connect("producer"), address, encode_message(1024, False), count,
                            presettled=False)
        client.wait_for(lambda: producer.opened, deadline, "attach")
        cpu0, start = cpu_seconds(broker.pid), time.perf_counter()
        while producer.acked + producer.rejected < count:
            if producer.sent < count:
                producer.send(count)
            client.turn(0 if producer.sent < count else 0.2)
            if client.errors():
                raise SystemExit(client.errors())
        secs = time.perf_counter() - start
        cpu = cpu_seconds(broker.pid) - cpu0
        client.close()
        return count / secs, cpu / count * 1e6
    finally:
        broker.terminate()
        broker.wait(30)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=30000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in CASES}
    for _ in range(args.reps):  # interleaved repetitions: machine noise hits every case alike
        for name, (config, address, groups) in CASES.items():
            results[name].append(run_case(config, address, groups, args.count))
    print(f"{'case':<26}{'msg/s (median)':>16}{'broker CPU us/msg':>20}")
    for name, runs in results.items():
        rate = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:<26}{rate:>16,.0f}{cpu:>20.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
