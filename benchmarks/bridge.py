"""Bridge throughput (issue 19 item 3): a local Hermod holding N messages (1 KiB, durable)
forwards its queue over a [[bridge]] to a second Hermod on loopback. The figure is messages per
second between the first and the last message the remote took (the bridge's own rate, not the
producer's), read from the remote's `queue.stat`; both brokers on the in-memory store, then
both on SQLite (synchronous FULL: the remote stores each message before it accepts it, the
local stores each acknowledgement).

    .venv/bin/python benchmarks/bridge.py [--count 20000] [--reps 1]
"""
from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bridge"))

from proton import Message  # noqa: E402

from bridge_testing import send_all  # noqa: E402
from hermod.broker.tools.clients import management_call  # noqa: E402

REMOTE = '[[address]]\nname = "inbound"\n  [[address.queue]]\n  name = "inbound"\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(work: Path, name: str, config: str, store: str, port: int = 0) -> tuple[subprocess.Popen, str]:
    (work / f"{name}.toml").write_text(config)
    proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", str(port), "--config",
                             str(work / f"{name}.toml"), "--store", store, "--http-port", "-1",
                             "--log-level", "error"], stdout=subprocess.PIPE, text=True, cwd=work)
    url = re.search(r"(amqp://\S+)", proc.stdout.readline()).group(1)
    return proc, url


def _added(url: str) -> int:
    return next(r["added"] for r in management_call(url, "queue.stat") if r["queue"] == "inbound")


def run(store: str, count: int) -> float:
    work = Path(tempfile.mkdtemp(prefix="hermod-bridge-bench-"))
    port = _free_port()
    local_cfg = ('[[address]]\nname = "outbound"\n  [[address.queue]]\n  name = "outbound"\n'
                 f'[[bridge]]\nname = "bench"\nqueue = "outbound"\nurl = "amqp://127.0.0.1:{port}"\n'
                 'address = "inbound"\n')
    procs = []
    try:
        local, local_url = _start(work, "local", local_cfg, store.format(name="local", work=work))
        procs.append(local)
        body = b"x" * 1024
        send_all(local_url, "outbound", [Message(body=body, durable=True, properties={"n": n})
                                         for n in range(count)])
        remote, remote_url = _start(work, "remote", REMOTE, store.format(name="remote", work=work), port)
        procs.append(remote)
        first = last = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            added = _added(remote_url)
            now = time.monotonic()
            if added and first is None:
                first, first_count = now, added
            if added >= count:
                last = now
                break
            time.sleep(0.02)  # sampling the remote's count
        if last is None or last == first:
            raise RuntimeError("the bridge did not forward everything in time")
        return (count - first_count) / (last - first)
    finally:
        for p in procs:
            p.terminate()
            p.wait(60)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--reps", type=int, default=1)
    args = p.parse_args()
    cases = {"memory": "memory", "sqlite-full": "sqlite:///{work}/{name}.db"}
    for name, store in cases.items():
        rates = sorted(run(store, args.count) for _ in range(args.reps))
        print(f"{name:<12} {args.count} x 1 KiB durable, Hermod -> Hermod: "
              f"median {rates[len(rates) // 2]:,.0f} msg/s (min {rates[0]:,.0f}, max {rates[-1]:,.0f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
