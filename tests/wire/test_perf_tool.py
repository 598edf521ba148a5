"""`hermod perf` against a real broker: keeps the load generator's raw-engine path (cffi layer,
own loop) exercised, since that layer is the binding's internal API."""
from __future__ import annotations

import re
import socket
import subprocess
import sys

from hermod_testing import ROOT


def perf(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-m", "hermod.broker", "perf", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("throughput ", "latency "))]
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', lines[0]))
    fields["mode"] = lines[0].split()[0]
    return proc, fields


def test_throughput_reports_counts_rate_and_broker_cpu(broker):
    proc, r = perf("--url", broker.url, "--address", "perf-t", "--count", "3000", "--pid", str(broker.proc.pid))
    assert proc.returncode == 0, proc.stderr
    assert r["mode"] == "throughput"
    assert int(r["msgs"]) == int(r["sent"]) == int(r["received"]) == int(r["acked"]) == 3000
    assert float(r["msg_per_s"]) > 0 and float(r["secs"]) > 0
    assert float(r["cpu_s_per_100k"]) >= 0
    assert "error" not in r


def test_latency_mode_stamps_survive_the_broker(broker):
    proc, r = perf("--url", broker.url, "--address", "perf-l", "--mode", "latency", "--rate", "2000",
                   "--count", "400", "--warmup", "20", "--durable")
    assert proc.returncode == 0, proc.stderr
    assert int(r["sent"]) == int(r["received"]) == 420
    assert int(r["msgs"]) == 400  # every message after the warm-up carried its stamp back
    assert "unstamped" not in r and "out_of_order" not in r
    assert 0 < float(r["p50_ms"]) <= float(r["p99_ms"]) <= float(r["max_ms"])


def test_multi_frame_messages(start_broker):
    b = start_broker(config="[server]\nmax_frame_size = 4096\n")
    proc, r = perf("--url", b.url, "--address", "perf-big", "--count", "40", "--size", "100000",
                   "--credit", "10")
    assert proc.returncode == 0, proc.stderr
    assert int(r["received"]) == 40


def test_unreachable_broker_is_one_error_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        proc, r = perf("--url", f"amqp://127.0.0.1:{port}", "--count", "10", timeout=30)
    assert proc.returncode == 1
    assert "error" in r and "cannot connect" in r["error"]
