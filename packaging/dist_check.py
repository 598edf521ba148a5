"""`make dist-check`: run the built artefacts as a user would, and measure their footprint.

1. The wheel, installed with `pipx install` (its own clean virtual environment), from a working
   directory outside the repository: `hermod run`, a producer/consumer round trip, SIGTERM.
2. The one-file build `dist/hermod`, under `env -i` with a PATH holding no Python: `hermod run`,
   a round trip, `hermod db upgrade` twice, `hermod analyse` refused with one line, SIGTERM.
3. Footprint, side by side in one run: file size, exec to readiness line, idle RSS after start,
   Q1 throughput (`hermod perf`, 1 KiB bodies) against the venv install and the one file.

Every check raises on failure (exit 1); the figures go to stdout and to dist/footprint.json.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_FILE = ROOT / "dist" / "hermod"
READY = re.compile(r"^hermod listening on amqp://([\d.]+):(\d+)$")


class Check(Exception):
    pass


def start(cmd: list[str], env: dict, cwd: Path, timeout: float = 30.0) -> tuple[subprocess.Popen, int, float]:
    """Start a broker; returns (process, port, seconds from exec to the readiness line)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Raw reads: a buffered reader would hold the readiness line where select() cannot see it.
    fd, pending = proc.stdout.fileno(), b""
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = t0 + timeout
    while time.perf_counter() < deadline and sel.select(deadline - time.perf_counter()):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        pending += chunk
        for line in pending.split(b"\n")[:-1]:
            m = READY.match(line.decode().strip())
            if m:
                return proc, int(m.group(2)), time.perf_counter() - t0
        pending = pending.rsplit(b"\n", 1)[-1]
    proc.kill()
    raise Check(f"{cmd[0]}: no readiness line within {timeout} s: {proc.stderr.read()[-2000:].decode(errors='replace')}")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(30)
    if rc != 0:
        raise Check(f"SIGTERM: exit {rc}: {proc.stderr.read()[-2000:].decode(errors='replace')}")


def run(cmd: list[str], env: dict, cwd: Path, expect: int = 0) -> str:
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != expect:
        raise Check(f"{' '.join(cmd[1:3])}: exit {r.returncode} (expected {expect}): {r.stdout[-500:]} {r.stderr[-1500:]}")
    return r.stdout + r.stderr


def round_trip(hermod: str, port: int, env: dict, cwd: Path) -> None:
    url = f"amqp://127.0.0.1:{port}"
    run([hermod, "producer", "--url", url, "--address", "dist.check", "--count", "10", "--queue"], env, cwd)
    out = run([hermod, "consumer", "--url", url, "--address", "dist.check", "--count", "10", "--queue"], env, cwd)
    if "received 10 messages" not in out:
        raise Check(f"round trip: {out[-500:]}")


def tree_rss_kib(pid: int) -> int:
    """RSS of a process and its children (the one-file bootloader runs the broker as its child)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, AttributeError):
            continue
    return total


def q1(hermod: str, port: int, env: dict, cwd: Path) -> float:
    out = run([hermod, "perf", "--url", f"amqp://127.0.0.1:{port}", "--mode", "throughput", "--count", "50000",
               "--address", "q1"], env, cwd)
    m = re.search(r"msg_per_s[=:]\s*([\d.]+)", out)
    if not m:
        raise Check(f"perf: no msg/s figure: {out[-500:]}")
    return float(m.group(1).replace(",", ""))


def footprint(name: str, hermod: str, env: dict, cwd: Path, runs: int = 3) -> dict:
    starts, rss, rates = [], [], []
    for i in range(runs):
        proc, port, ready = start([hermod, "run", "--port", "0", "--data", str(cwd / f"fp-{name}-{i}")], env, cwd)
        try:
            starts.append(ready)
            time.sleep(0)  # the RSS right after readiness is the idle figure
            rss.append(tree_rss_kib(proc.pid) / 1024)
            rates.append(q1(hermod, port, env, cwd))
        finally:
            stop(proc)
    return {"ready_s": round(statistics.median(starts), 3), "ready_s_max": round(max(starts), 3),
            "idle_rss_mib": round(statistics.median(rss), 1), "q1_msg_s": round(statistics.median(rates)),
            "q1_msg_s_all": [round(r) for r in rates]}


def check_wheel(work: Path) -> str:
    """Build the wheel and `pipx install` it (its own clean venv); returns that `hermod`."""
    wheels = work / "wheels"
    run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(wheels)], dict(os.environ), work)
    (wheel,) = wheels.glob("hermod_broker-*.whl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIPX_HOME=str(work / "pipx"), PIPX_BIN_DIR=str(work / "pipx-bin"), PIPX_MAN_DIR=str(work / "pipx-man"))
    run([sys.executable, "-m", "pipx", "install", "--python", sys.executable, str(wheel)], env, work)
    hermod = str(work / "pipx-bin" / "hermod")
    proc, port, _ = start([hermod, "run", "--port", "0", "--data", str(work / "wheel-data")], env, work)
    try:
        round_trip(hermod, port, env, work)
    finally:
        stop(proc)
    upgraded = run([hermod, "db", "upgrade", "--store", f"sqlite:///{work / 'wheel.db'}"], env, work)
    version = run([hermod, "--version"], env, work).strip()
    print(f"wheel: pipx install {wheel.name}: {version}; run, round trip, SIGTERM, db upgrade: ok ({upgraded.strip()})")
    return hermod


def check_one_file(work: Path) -> dict:
    if not ONE_FILE.is_file():
        raise Check(f"{ONE_FILE} is missing: run `make dist`")
    no_python = work / "bin"
    no_python.mkdir()
    env = {"PATH": str(no_python), "HOME": str(work)}
    hermod = str(ONE_FILE)
    proc, port, _ = start([hermod, "run", "--port", "0", "--data", str(work / "file-data")], env, work)
    try:
        round_trip(hermod, port, env, work)
    finally:
        stop(proc)
    store = f"sqlite:///{work / 'file.db'}"
    run([hermod, "db", "upgrade", "--store", store], env, work)
    run([hermod, "db", "upgrade", "--store", store], env, work)
    refused = run([hermod, "analyse", "--store", store, "--out", str(work / "an")], env, work, expect=2)
    if "Spark" not in refused or len(refused.strip().splitlines()) != 1:
        raise Check(f"analyse from the file: expected one line naming Spark, got {refused!r}")
    check_notify(hermod, env, work)
    print("one file: env -i with no Python on PATH: run, round trip, SIGTERM, db upgrade x2, analyse refused, "
          "systemd READY/WATCHDOG/STOPPING: ok")
    return env


def check_notify(hermod: str, env: dict, work: Path) -> None:
    """Under systemd the bootloader is MAINPID and WATCHDOG_PID; the broker is its child. It must
    still say READY=1, ping the watchdog and say STOPPING=1 (`NotifyAccess=all` in our unit)."""
    path = str(work / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    # WATCHDOG_PID is the process systemd starts: the shell execs the file, so it is $$.
    script = f'WATCHDOG_PID=$$ exec {hermod} run --port 0 --data {work / "notify-data"}'
    proc, _, _ = start(["/bin/sh", "-c", script], dict(env, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000"), work)
    said: list[str] = []
    try:
        while not ({"READY=1", "WATCHDOG=1"} <= set(said)):
            said += sock.recv(4096).decode().splitlines()
    finally:
        stop(proc)
    while "STOPPING=1" not in said:
        said += sock.recv(4096).decode().splitlines()
    sock.close()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hermod-dist-") as tmp:
        work = Path(tmp)
        try:
            venv_hermod = check_wheel(work)
            file_env = check_one_file(work)
            venv_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            figures = {
                "file_size_mib": round(ONE_FILE.stat().st_size / 2**20, 1),
                "load_avg_1m": os.getloadavg()[0],
                "venv": footprint("venv", venv_hermod, venv_env, work),
                "one_file": footprint("file", str(ONE_FILE), file_env, work),
            }
        except Check as e:
            print(f"dist-check: FAILED: {e}", file=sys.stderr)
            return 1
    (ROOT / "dist" / "footprint.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
