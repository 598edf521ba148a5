"""STOMP benchmark: Q1 (one producer with a receipt per SEND, at most 100 unanswered; one consumer
with client-individual ACKs) and T4 (one producer, four auto-ack subscribers of a topic), run by
ActiveMQ Classic's own STOMP client class (StompLoad.java on `StompConnection`, the same client for
every broker) against Hermod (memory store), Debian's ActiveMQ 5.17.2 (non-persistent) and
Debian's RabbitMQ 3.10 with its STOMP plugin (a private node, as the bridge tests start it), in
one run, interleaved, several rounds; prints each run and the medians.

    PYTHONPATH=. python benchmarks/stomp/run.py [--count 20000] [--size 1024] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "stomp"), str(ROOT / "tests" / "bridge")]

from bridge_testing import free_port  # noqa: E402
from classic import Classic  # noqa: E402
from hermod_testing import BrokerProcess  # noqa: E402
from rabbitmq import RabbitNode, missing  # noqa: E402


class RabbitStomp(RabbitNode):
    """The bridge tests' private RabbitMQ 3.10 node, with its STOMP plugin on a port of its own
    (CONNECT without a login is the guest user)."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.stomp_port = free_port()
        (base / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
        (base / "rabbitmq.conf").write_text(
            "loopback_users = none\n"
            f"stomp.listeners.tcp.1 = 127.0.0.1:{self.stomp_port}\n"
            "stomp.default_user = guest\nstomp.default_pass = guest\n")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.stomp_port}"

CLASSPATH = ["/usr/share/java/activemq-stomp.jar", "/usr/share/java/activemq-client.jar"]


def build(out: Path) -> str:
    cp = ":".join(CLASSPATH)
    subprocess.run(["javac", "-cp", cp, "-d", str(out), str(HERE / "StompLoad.java")], check=True)
    return f"{cp}:{out}"


def load(cp: str, scenario: str, address: str, count: int, size: int) -> float:
    host, port = address.rsplit(":", 1)
    done = subprocess.run(["java", "-cp", cp, "StompLoad", scenario, host, port, str(count), str(size)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="stomp-bench-"))
    cp = build(work)
    hermod = BrokerProcess(["--port", "0", "--store", "memory"], work).start()
    classic = Classic(work / "classic").start()
    brokers = [("hermod", hermod), ("activemq-5.17.2", classic)]
    rabbit = None
    if missing() is None:
        rabbit = RabbitStomp(work / "rabbit").start()
        brokers.append(("rabbitmq-3.10", rabbit))
    else:
        print("RabbitMQ left out:", missing())
    results: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for scenario in ("q1", "t4"):
                for name, broker in brokers:
                    rate = load(cp, scenario, broker.address, args.count, args.size)
                    results.setdefault((scenario, name), []).append(rate)
                    print(f"{scenario} {name}: {rate:.0f} msg/s", flush=True)
    finally:
        hermod.stop()
        classic.stop()
        if rabbit is not None:
            rabbit.stop()
    for (scenario, name), rates in sorted(results.items()):
        print(f"median {scenario} {name}: {statistics.median(rates):.0f} msg/s ({', '.join(f'{r:.0f}' for r in rates)})")


if __name__ == "__main__":
    main()
