"""Q1: one producer -> one consumer on one queue, Hermod beside RabbitMQ 3.10 and the Proton C
example broker, measured in the same run.

For each repetition, each broker in turn (interleaved, so slow drift of this shared machine hits
all three alike): start it privately on a free port, warm up (10k messages, not counted), run
`hermod perf --mode throughput` (100k non-durable 1 KiB messages, consumer credit 1,000, broker
CPU read from /proc) and `hermod perf --mode latency --rate 1000`, stop it. Medians over the
repetitions go into a table on stdout and into benchmarks/results/ (JSON + text).

    .venv/bin/python benchmarks/q1.py [--reps 3] [--count 100000] [--brokers hermod,rabbitmq,proton-c]

Needs what `benchmarks/setup.sh` installs (RabbitMQ from Debian, the Proton C broker built into
benchmarks/build/). Not part of `make test`; `make bench` runs it through benchmarks/run.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hermod.broker.tools.perfecho import echo_floor  # noqa: E402
from hermod.broker.tools.perfrun import process_tree  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
BUILD = HERE / "build"
PROTON_C_BROKER = BUILD / "proton-c-broker"
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(proc: subprocess.Popen, pattern: str, timeout: float, log: Path | None = None) -> re.Match:
    """Read the process's stdout until a line matches (the process's output is line-buffered)."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    seen = []
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < deadline:
        chunk = proc.stdout.read()
        if chunk:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace")
                seen.append(text)
                m = rx.search(text)
                if m:
                    return m
        elif proc.poll() is not None:
            break
        else:
            time.sleep(0.05)
    tail = "\n".join(seen[-15:])
    raise RuntimeError(f"{proc.args[0]} did not get ready (exit {proc.poll()}):\n{tail}"
                       + (f"\nsee {log}" if log else ""))


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_process(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# -- the brokers ---------------------------------------------------------------------------------


class Hermod:
    """`hermod run --port 0 --store memory` from `SRC` (the work tree, or a `--hermod-ref` export)."""

    name = "hermod"
    src: Path = ROOT
    label = ""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc = None

    def start(self) -> tuple[int, int]:
        # `-m hermod.broker` from the source dir: that tree's package wins over the installed one.
        env = dict(os.environ, PYTHONPATH=str(self.src))
        self.proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", "memory",
                                      "--log-level", "warning"],
                                     cwd=self.src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        m = wait_for_line(self.proc, r"hermod listening on amqp://[^ ]*:(\d+)", 30)
        return int(m.group(1)), self.proc.pid

    def address(self, queue: str) -> str:
        return queue

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc)

    def version(self) -> str:
        return f"hermod {self.label}"


def git_describe(ref: str | None) -> str:
    """The commit measured: `ref`'s id, or the work tree's HEAD (+ "dirty" when it has changes)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if ref:
        return git("rev-parse", "--short", ref) + f" ({ref})"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "broker", "store")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes (work tree)" if dirty else " (work tree)")


def export_ref(ref: str, dest: Path) -> Path:
    """A clean copy of the repo at `ref` (git archive: no worktree bookkeeping in .git)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


class ProtonC:
    name = "proton-c"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc = None

    def start(self) -> tuple[int, int]:
        if not PROTON_C_BROKER.exists():
            raise RuntimeError(f"{PROTON_C_BROKER} missing: run benchmarks/setup.sh")
        self.proc = subprocess.Popen([str(PROTON_C_BROKER), "127.0.0.1", "0"], cwd=self.workdir,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        m = wait_for_line(self.proc, r"listening on (\d+)", 15)
        return int(m.group(1)), self.proc.pid

    def address(self, queue: str) -> str:
        return queue

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc, 5)

    def version(self) -> str:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libqpid-proton11"],
                             capture_output=True, text=True)
        return f"proton-c examples/broker.c, libqpid-proton {out.stdout.strip()} (4 threads, credit 5)"


class RabbitMQ:
    """A private RabbitMQ node: own ports, own epmd, own mnesia/log dirs under `workdir`. `plugins`
    and `conf` (lines added to rabbitmq.conf) serve other protocols' benchmarks (STOMP)."""

    name = "rabbitmq"

    def __init__(self, workdir: Path, plugins: tuple[str, ...] = ("rabbitmq_amqp1_0",), conf: str = ""):
        self.workdir = workdir / "rabbitmq"
        self.plugins, self.conf = plugins, conf
        self.proc = None
        self.epmd = None
        self.log = self.workdir / "stdout.log"

    def start(self) -> tuple[int, int]:
        if not RABBITMQ_SERVER.exists():
            raise RuntimeError("RabbitMQ missing: run benchmarks/setup.sh")
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        for d in ("mnesia", "log", "home"):
            (self.workdir / d).mkdir(parents=True)
        (self.workdir / "enabled_plugins").write_text(f"[{','.join(self.plugins)}].\n")
        # loopback_users: 'guest' (the AMQP 1.0 plugin's user for SASL ANONYMOUS) is fine on loopback.
        (self.workdir / "rabbitmq.conf").write_text("loopback_users = none\n" + self.conf)
        (self.workdir / "home" / ".erlang.cookie").write_text("HERMODQ1BENCHCOOKIE")
        os.chmod(self.workdir / "home" / ".erlang.cookie", 0o400)
        port, dist, epmd_port = free_port(), free_port(), free_port()
        env = dict(os.environ, HOME=str(self.workdir / "home"), RABBITMQ_NODE_PORT=str(port),
                   RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_DIST_PORT=str(dist),
                   ERL_EPMD_PORT=str(epmd_port), RABBITMQ_NODENAME=f"hermodq1-{port}@localhost",
                   RABBITMQ_MNESIA_BASE=str(self.workdir / "mnesia"), RABBITMQ_LOG_BASE=str(self.workdir / "log"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(self.workdir / "enabled_plugins"),
                   RABBITMQ_CONFIG_FILE=str(self.workdir / "rabbitmq.conf"))
        self.env = env
        # Our own epmd in the foreground, so that it is ours to stop afterwards.
        epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
        if epmd:
            self.epmd = subprocess.Popen([str(epmd), "-port", str(epmd_port)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env)
        out = open(self.log, "wb")
        self.proc = subprocess.Popen([str(RABBITMQ_SERVER)], cwd=self.workdir, env=env, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited {self.proc.returncode}; see {self.log}")
            if "Starting broker... completed" in self.log.read_text(errors="replace") and port_open(port):
                return port, self.proc.pid
            time.sleep(0.25)
        raise RuntimeError(f"rabbitmq-server did not start in 90 s; see {self.log}")

    def address(self, queue: str) -> str:
        return f"/queue/{queue}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # The wrapper script traps TERM and stops the node (rabbitmqctl stop) itself.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                for pid in reversed(process_tree(self.proc.pid)):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait(5)
        if self.epmd is not None:
            stop_process(self.epmd, 5)

    def version(self) -> str:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"], capture_output=True, text=True)
        return f"rabbitmq-server {out.stdout.strip()} (rabbitmq_amqp1_0)"


BROKERS = {"hermod": Hermod, "rabbitmq": RabbitMQ, "proton-c": ProtonC}

# -- running hermod perf -------------------------------------------------------------------------


RT_PRIORITY = 10


def set_realtime(pids: list[int], on: bool) -> None:
    """SCHED_FIFO (or back to SCHED_OTHER) for every thread of the given processes."""
    policy, prio = (os.SCHED_FIFO, RT_PRIORITY) if on else (os.SCHED_OTHER, 0)
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setscheduler(int(tid), policy, os.sched_param(prio))
            except ProcessLookupError:
                pass


def realtime_available() -> bool:
    try:
        subprocess.run([sys.executable, "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))"],
                       check=True, capture_output=True, timeout=10)
        return True
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return False


def _client_realtime() -> None:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))


def perf(port: int, pid: int, address: str, extra: list[str], timeout: float, realtime: bool = False) -> dict:
    """Run `hermod perf` (this repo's work tree) and parse its result line. With `realtime`, the
    client runs under SCHED_FIFO (the caller does the same for the broker's threads)."""
    cmd = [sys.executable, "-m", "hermod.broker", "perf", "--url", f"amqp://127.0.0.1:{port}", "--address", address,
           "--pid", str(pid), "--timeout", str(timeout)] + extra
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 60,
                          preexec_fn=_client_realtime if realtime else None)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(("throughput ", "latency "))), "")
    if not line:
        raise RuntimeError(f"hermod perf printed no result (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return parse_result(line)


def parse_result(line: str) -> dict:
    mode, _, rest = line.partition(" ")
    out: dict = {"mode": mode, "line": line}
    for m in re.finditer(r'(\w+)=("[^"]*"|\S+)', rest):
        key, value = m.group(1), m.group(2).strip('"')
        try:
            out[key] = float(value) if any(c in value for c in ".en") and key != "error" else int(value)
        except ValueError:
            out[key] = value
    return out


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# -- the run -------------------------------------------------------------------------------------


def run(args) -> dict:
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    for n in names:
        if n not in BROKERS:
            raise SystemExit(f"unknown broker {n!r}; choose from {', '.join(BROKERS)}")
    workdir = Path(tempfile.mkdtemp(prefix="hermod-q1-"))
    Hermod.label = git_describe(args.hermod_ref)
    Hermod.src = export_ref(args.hermod_ref, workdir / "hermod-src") if args.hermod_ref else ROOT
    runs: dict[str, list[dict]] = {n: [] for n in names}
    floor: list[dict] = []
    versions: dict[str, str] = {}
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_start = load_average()
    rt = args.realtime and realtime_available()
    if args.realtime and not rt:
        print("note: SCHED_FIFO not permitted here; skipping the real-time latency runs", flush=True)
    try:
        for rep in range(1, args.reps + 1):
            for name in names:
                broker = BROKERS[name](workdir)
                versions[name] = broker.version()
                record: dict = {"rep": rep, "load_before": load_average()}
                try:
                    t0 = time.monotonic()
                    port, pid = broker.start()
                    record["startup_s"] = round(time.monotonic() - t0, 1)
                    tag = f"q1r{rep}"
                    if args.warmup:
                        perf(port, pid, broker.address(f"{tag}warm"),
                             ["--count", str(args.warmup), "--size", str(args.size)], args.timeout)
                    record["throughput"] = perf(port, pid, broker.address(f"{tag}tput"),
                                                ["--mode", "throughput", "--count", str(args.count),
                                                 "--size", str(args.size), "--credit", str(args.credit)],
                                                args.timeout)
                    lat_args = ["--mode", "latency", "--rate", str(args.rate), "--count", str(args.latency_count),
                                "--size", str(args.size)]
                    record["latency"] = perf(port, pid, broker.address(f"{tag}lat"), lat_args, args.timeout)
                    if rt:
                        # Again with the broker's threads and the client under SCHED_FIFO: the other
                        # tenants of this machine can no longer delay a wake-up, what is left is
                        # the broker's own latency.
                        tree = process_tree(pid)
                        set_realtime(tree, True)
                        try:
                            record["latency_rt"] = perf(port, pid, broker.address(f"{tag}latrt"), lat_args,
                                                        args.timeout, realtime=True)
                        finally:
                            set_realtime(process_tree(pid), False)
                except Exception as e:  # noqa: BLE001 - one broker's failure is reported, the run goes on
                    record["error"] = str(e)
                finally:
                    broker.stop()
                record["load_after"] = load_average()
                runs[name].append(record)
                print(f"rep {rep} {name:9s} " + summary_line(record), flush=True)
            if args.floor:
                f = echo_floor(args.rate, args.latency_count, args.size)
                floor.append(f)
                print(f"rep {rep} echo floor p50 {f['p50_ms']:.3f} ms p99 {f['p99_ms']:.3f} ms "
                      f"max {f['max_ms']:.3f} ms (load {load_average()})", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"started": started, "load_start": load_start, "host": platform.node(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "versions": versions,
            "params": {"count": args.count, "size": args.size, "credit": args.credit, "reps": args.reps,
                       "rate": args.rate, "latency_count": args.latency_count, "warmup": args.warmup,
                       "durable": False},
            "hermod_src": Hermod.label, "realtime_latency": rt, "runs": runs, "summary": summarize(runs), "echo_floor": floor,
            "echo_floor_summary": {k: _median([f[k] for f in floor]) for k in ("p50_ms", "p99_ms", "max_ms")}
            if floor else None}


def summary_line(record: dict) -> str:
    if "error" in record and "throughput" not in record:
        return f"ERROR {record['error']}"
    nan = float("nan")
    t, lat, rt = record.get("throughput", {}), record.get("latency", {}), record.get("latency_rt", {})
    parts = [f"{t.get('msg_per_s', 0):>8,} msg/s", f"cpu {t.get('cpu_s_per_100k', nan):.2f} s/100k"]
    if lat:
        parts.append(f"p50 {lat.get('p50_ms', nan):.3f} p99 {lat.get('p99_ms', nan):.3f} ms")
    if rt:
        parts.append(f"RT p50 {rt.get('p50_ms', nan):.3f} p99 {rt.get('p99_ms', nan):.3f} ms")
    err = t.get("error") or lat.get("error") or rt.get("error") or record.get("error")
    if err:
        parts.append(f"ERROR {err}")
    parts.append(f"(load {record['load_before']})")
    return "  ".join(parts)


def _median(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summarize(runs: dict) -> dict:
    out = {}
    for name, records in runs.items():
        ok_t = [r["throughput"] for r in records if "throughput" in r and not r["throughput"].get("error")]
        ok_l = [r["latency"] for r in records if "latency" in r and not r["latency"].get("error")]
        tput = [t["msg_per_s"] for t in ok_t]
        out[name] = {
            "ok_runs": len(ok_t), "latency_runs": len(ok_l),
            "msg_per_s": _median(tput), "msg_per_s_min": min(tput) if tput else None,
            "msg_per_s_max": max(tput) if tput else None,
            "cpu_s_per_100k": _median([t.get("cpu_s_per_100k") for t in ok_t]),
            "p50_rt_ms": _median([r["latency_rt"].get("p50_ms") for r in records
                                  if "latency_rt" in r and not r["latency_rt"].get("error")]),
            "p99_rt_ms": _median([r["latency_rt"].get("p99_ms") for r in records
                                  if "latency_rt" in r and not r["latency_rt"].get("error")]),
            "max_rt_ms": _median([r["latency_rt"].get("max_ms") for r in records
                                  if "latency_rt" in r and not r["latency_rt"].get("error")]),
            "p50_ms": _median([lat.get("p50_ms") for lat in ok_l]),
            "p99_ms": _median([lat.get("p99_ms") for lat in ok_l]),
            "max_ms": _median([lat.get("max_ms") for lat in ok_l]),
            "errors": [r.get("error") or r.get("throughput", {}).get("error") or r.get("latency", {}).get("error")
                       for r in records if r.get("error") or r.get("throughput", {}).get("error")
                       or r.get("latency", {}).get("error")],
        }
    return out


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(result: dict) -> str:
    p = result["params"]
    rt = result.get("realtime_latency")
    head = (f"{'broker':10s} {'msg/s':>8s} {'(min-max)':>17s} {'CPU s/100k':>10s} {'p50 ms':>7s} {'p99 ms':>7s} "
            f"{'max ms':>7s}" + (f" | {'RT p50':>7s} {'RT p99':>7s} {'RT max':>7s}" if rt else ""))
    lines = [f"Q1: 1 producer -> 1 consumer, one queue, {p['count']:,} x {p['size']} B non-durable, "
             f"consumer credit {p['credit']}, {p['reps']} interleaved reps, medians; "
             f"latency: {p['latency_count']:,} msgs at {p['rate']:g} msg/s"
             + ("; RT = the same with broker and client under SCHED_FIFO" if rt else ""), head]
    for name, s in result["summary"].items():
        rng = f"({fmt(s['msg_per_s_min'], ',.0f')}-{fmt(s['msg_per_s_max'], ',.0f')})"
        line = (f"{name:10s} {fmt(s['msg_per_s'], ',.0f'):>8s} {rng:>17s} {fmt(s['cpu_s_per_100k'], '.2f'):>10s} "
                f"{fmt(s['p50_ms'], '.3f'):>7s} {fmt(s['p99_ms'], '.3f'):>7s} {fmt(s['max_ms'], '.3f'):>7s}")
        if rt:
            line += (f" | {fmt(s['p50_rt_ms'], '.3f'):>7s} {fmt(s['p99_rt_ms'], '.3f'):>7s} "
                     f"{fmt(s['max_rt_ms'], '.3f'):>7s}")
        lines.append(line)
    fl = result.get("echo_floor_summary")
    if fl:
        lines.append(f"{'echo floor':10s} {'':>8s} {'':>17s} {'':>10s} {fmt(fl['p50_ms'], '.3f'):>7s} "
                     f"{fmt(fl['p99_ms'], '.3f'):>7s} {fmt(fl['max_ms'], '.3f'):>7s}"
                     f"{' |' if rt else ''}   no broker: a Python echo over loopback TCP, same rate")
    summ = result["summary"]
    h, r = summ.get("hermod"), summ.get("rabbitmq")
    if h and h["msg_per_s"]:
        if r and r["msg_per_s"]:
            ratio = h["msg_per_s"] / r["msg_per_s"]
            lines.append(f"hermod / rabbitmq Q1 throughput: {ratio:.1f}x (target >= 3x): {'PASS' if ratio >= 3 else 'FAIL'}")
            if h["cpu_s_per_100k"] and r["cpu_s_per_100k"]:
                lines.append(f"hermod / rabbitmq CPU per delivery: {h['cpu_s_per_100k'] / r['cpu_s_per_100k']:.2f}x")
        for key, what in (("p99_ms", "as scheduled"), ("p99_rt_ms", "under SCHED_FIFO")):
            if h.get(key) is not None:
                lines.append(f"hermod p99 at {p['rate']:g} msg/s, {what}: {h[key]:.3f} ms (target < 1 ms): "
                             f"{'PASS' if h[key] < 1 else 'FAIL'}")
    for name, s in summ.items():
        for e in s["errors"]:
            lines.append(f"error ({name}): {e}")
    lines.append("versions: " + "; ".join(result["versions"].values()))
    lines.append(f"machine: {result['cpus']} CPUs, Python {result['python']}, started {result['started']}, "
                 f"load average {result.get('load_start', '?')} at start")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="hermod,rabbitmq,proton-c")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--latency-count", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=10000, help="messages moved before each broker's measured runs")
    ap.add_argument("--timeout", type=float, default=300.0, help="per perf run")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' temp dirs (logs)")
    ap.add_argument("--no-realtime", dest="realtime", action="store_false",
                    help="skip the latency runs under SCHED_FIFO")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="skip the no-broker echo latency floor measured each repetition")
    ap.add_argument("--hermod-ref", default=None,
                    help="measure Hermod at this git commit (exported to a temp dir) instead of the work tree")
    args = ap.parse_args(argv)
    result = run(args)
    text = table(result)
    print()
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"q1-{stamp}.json").write_text(json.dumps(result, indent=2))
    (RESULTS / f"q1-{stamp}.txt").write_text(text + "\n")
    print(f"\nresults: {RESULTS / f'q1-{stamp}.txt'} (+ .json)")
    return 0 if all(s["ok_runs"] for s in result["summary"].values()) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
