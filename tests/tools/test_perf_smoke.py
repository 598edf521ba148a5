"""The benchmark tooling works (issue 18 items 5-6): `hermod perf --scenario ... --json` against a
real broker, and every curve of benchmarks/curves.py in `--quick` mode. Counts and fields only,
never a speed: figures on a shared machine prove nothing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hermod_testing import ROOT

SUMMARY_FIELDS = {"scenario", "mode", "producers", "consumers", "msgs", "sent", "received", "acked", "expected",
                  "secs", "msg_per_s", "deliveries_per_s", "cpu_s", "cpu_s_per_100k", "rss_mib", "size"}


def perf_json(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-m", "hermod.broker", "perf", "--json", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.stdout.count("\n") == 1, (proc.stdout, proc.stderr)
    return proc, json.loads(proc.stdout)


@pytest.mark.parametrize("scenario,producers,consumers,diverts,deliveries_per_msg", [
    ("q1", 2, 3, 0, 1),       # competing consumers: each message once
    ("q1d", 1, 1, 0, 1),
    ("t4", 1, None, 0, 4),    # four subscribers by default: each gets every message
    ("fanout", 1, 1, 3, 4),   # the address and its three divert copies
])
def test_scenario_json_summary_counts(start_broker, scenario, producers, consumers, diverts, deliveries_per_msg):
    b = start_broker(config=subprocess.run(
        [sys.executable, "-m", "hermod.broker", "perf", "--scenario", "fanout", "--diverts", "3", "--print-config"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    args = ["--url", b.url, "--scenario", scenario, "--count", "600", "--producers", str(producers),
            "--diverts", str(diverts), "--pid", str(b.proc.pid)]
    if consumers is not None:
        args += ["--consumers", str(consumers)]
    proc, s = perf_json(*args)
    assert proc.returncode == 0, proc.stderr
    assert SUMMARY_FIELDS <= s.keys(), s
    assert s["scenario"] == scenario and s["mode"] == "throughput" and "error" not in s
    assert s["producers"] == producers
    assert s["consumers"] == (4 if consumers is None else consumers * (diverts + 1))
    assert s["sent"] == s["acked"] == s["msgs"] == 600
    assert s["received"] == s["expected"] == 600 * deliveries_per_msg
    assert s["durable"] == (1 if scenario == "q1d" else 0)
    assert s["msg_per_s"] > 0 and s["cpu_s_per_100k"] >= 0 and s["rss_mib"] > 0


def test_lat_reports_percentiles_and_the_echo_floor(broker):
    proc, s = perf_json("--url", broker.url, "--scenario", "lat", "--rate", "2000", "--count", "300",
                        "--warmup", "10")
    assert proc.returncode == 0, proc.stderr
    assert s["mode"] == "latency" and s["msgs"] == 300 and s["received"] == 310
    assert 0 < s["p50_ms"] <= s["p99_ms"] <= s["max_ms"]
    assert 0 < s["echo_p50_ms"] <= s["echo_p99_ms"]


def test_progress_goes_to_stderr_and_a_failure_is_one_json_error(broker):
    proc, s = perf_json("--url", broker.url, "--scenario", "fanout", "--diverts", "1", "--count", "10",
                        "--timeout", "6")
    # No divert configured: the copy's queue never gets anything, so the run times out.
    assert proc.returncode == 1
    assert s["received"] == 10 and s["expected"] == 20
    assert "timed out" in s["error"]
    assert "hermod perf fanout:" in proc.stderr  # the progress line (one every few seconds off a terminal)


def test_mode_is_kept_for_older_scripts(broker):
    proc = subprocess.run([sys.executable, "-m", "hermod.broker", "perf", "--url", broker.url, "--mode", "throughput",
                           "--durable", "--count", "200"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("throughput scenario=q1d ") and " received=200 " in line


def test_every_curve_runs_in_quick_mode(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "curves.py"), "--quick", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = json.loads(proc.stdout.strip().splitlines()[-1])
    curves = {c["name"]: c for c in json.loads(open(written["json"]).read())}
    assert set(curves) == {"consumers", "queues", "body_size", "diverts", "subscriptions", "backlog", "idle_conns"}
    xs = {name: [p["x"] for p in c["points"]] for name, c in curves.items()}
    assert xs == {"consumers": [1, 4], "queues": [1, 10], "body_size": [1, 1024, 65536], "diverts": [0, 2],
                  "subscriptions": [0, 100], "backlog": [2000] * 4, "idle_conns": [0, 200]}
    for c in curves.values():
        for p in c["points"]:
            assert p["msg_per_s"] > 0 and p["cpu_us_per_msg"] >= 0 and p["rss_mib"] > 0, (c["name"], p)
    assert [p["deliveries"] for p in curves["diverts"]["points"]] == [1000, 3000]
    assert [(p["series"], p["msgs"], p["deliveries"]) for p in curves["backlog"]["points"]] == [
        ("fill plain", 2000, 0), ("drain plain", 2000, 2000), ("fill selector", 2000, 0), ("drain selector", 2000, 2000)]
    assert curves["idle_conns"]["points"][1]["rss_kib_per_conn"] > 0
    assert curves["idle_conns"]["points"][1]["open_s_per_1k"] > 0
    assert curves["subscriptions"]["points"][1]["open_s_per_1k"] > 0
    assert "| consumers |" in open(written["markdown"]).read()
    assert len(written["charts"]) == 7 and all(open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in written["charts"])


# -- [server] event_loop (the uvloop trial) -------------------------------------------------------


def run_with_config(tmp_path, config: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "loop.toml").write_text(config)
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", "memory",
                           "--config", str(tmp_path / "loop.toml")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=env)


def test_unknown_event_loop_is_one_config_line(tmp_path):
    proc = run_with_config(tmp_path, '[server]\nevent_loop = "trio"\n')
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "event_loop" in lines[0] and "asyncio, uvloop, auto" in lines[0], proc.stderr


def test_uvloop_asked_for_but_missing_is_one_line(tmp_path):
    import os
    # A directory that shadows uvloop with a module that fails to import: "not installed".
    shadow = tmp_path / "shadow"
    (shadow / "uvloop").mkdir(parents=True)
    (shadow / "uvloop" / "__init__.py").write_text("raise ImportError('no uvloop here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), str(ROOT)]))
    proc = run_with_config(tmp_path, '[server]\nevent_loop = "uvloop"\n', env=env)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "uvloop is not installed" in lines[0], proc.stderr


def test_broker_on_uvloop_moves_messages(start_broker):
    pytest.importorskip("uvloop")
    b = start_broker(config='[server]\nevent_loop = "uvloop"\n')
    proc, s = perf_json("--url", b.url, "--scenario", "t4", "--count", "300")
    assert proc.returncode == 0, proc.stderr
    assert s["received"] == 1200
