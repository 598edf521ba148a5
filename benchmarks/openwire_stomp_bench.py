"""`make bench-openwire` / `make bench-stomp` (issues 30 and 31): the same client programs against
ActiveMQ Classic 5.17.2 (Debian's `activemq`, a private instance with KahaDB, tests/peers/classic.py)
and Hermod (one port for every protocol, SQLite store by default), and for STOMP also RabbitMQ 3.10's
STOMP plugin, in one run, interleaved: each
repetition starts every broker in turn (the order rotates), warms it up, runs every scenario
and stops it. Medians of the repetitions.

The load generators are not ours to tune: OpenWire scenarios run benchmarks/java/OpenWireLoad.java
on the stock ActiveMQ 5.17 JMS client with its defaults (q1 non-persistent, q1d persistent, 1 -> 1
queue; t4 1 -> 4 topic subscribers; psync N synchronous persistent producers); STOMP scenarios run
benchmarks/java/StompLoad.java on Classic's own StompConnection class (q1: persistent SENDs with
receipts, ack:client with an ACK per message; t4). amqp-q1 runs `hermod perf`'s q1 flow (Hermod
only: Debian's Classic has no AMQP transport) so that AMQP Q1 can be compared with bench.py's.

For every run: msg/s, deliveries/s, broker CPU seconds per 100k messages sent (user + system from
/proc of the broker's processes, before and after the run), broker RSS after the run and its peak
(VmHWM), and the 1-minute load average. A scenario whose protocol a broker does not serve (Hermod
before its OpenWire and STOMP adapters) is reported as "not served", and the run carries on.

    .venv/bin/python benchmarks/openwire_stomp_bench.py [--reps 3] [--count 20000]
        [--protocols openwire,stomp,amqp] [--scenarios openwire-q1,...] [--targets classic,hermod,rabbitmq]
        [--hermod-store sqlite] [--producers 8] [--classic-heap 512m]
    (--targets classic,hermod,hermod@/path/to/other/checkout: before and after in one run)

Out: benchmarks/results/openwire-stomp-STAMP.md (the table) and .json (every run).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "peers"))

import classic  # noqa: E402
import javaload  # noqa: E402
import q1  # noqa: E402
from hermod.broker.tools import perfrun  # noqa: E402
from hermod.broker.tools.perf import scenario_flow  # noqa: E402
from hermodproc import HermodProc  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    protocol: str  # openwire | stomp | amqp
    kind: str  # the load generator's --scenario
    fanout: int
    persistent: bool


SCENARIOS = {s.name: s for s in (
    Scenario("openwire-q1", "openwire", "q1", 1, False),
    Scenario("openwire-q1d", "openwire", "q1d", 1, True),
    Scenario("openwire-t4", "openwire", "t4", 4, False),
    Scenario("openwire-psync", "openwire", "psync", 1, True),
    Scenario("stomp-q1", "stomp", "q1", 1, True),
    Scenario("stomp-t4", "stomp", "t4", 4, False),
    Scenario("amqp-q1", "amqp", "q1", 1, False),
)}
NOT_SERVED = "not served"


class ClassicTarget:
    name = "classic"
    protocols = ("openwire", "stomp")
    credentials = None

    def __init__(self, workdir: Path, heap: str):
        self.workdir, self.heap, self.n = workdir, heap, 0
        self.broker: classic.ClassicBroker | None = None

    def start(self) -> None:
        self.n += 1
        self.broker = classic.ClassicBroker(self.workdir / f"classic-{self.n}", persistent=True, heap=self.heap,
                                            protocols=("openwire", "stomp")).start()

    @property
    def pid(self) -> int:
        assert self.broker
        return self.broker.pid

    def openwire_url(self) -> str:
        assert self.broker
        return self.broker.openwire_url

    def stomp_port(self) -> int:
        assert self.broker
        return self.broker.stomp_port

    def amqp_port(self) -> int:
        raise RuntimeError("no AMQP port")

    def stop(self) -> None:
        if self.broker:
            self.broker.stop()
            self.broker = None

    def version(self) -> str:
        return classic.version()


class RabbitTarget:
    """RabbitMQ 3.10 (Debian's, as bench.py starts it) with its STOMP plugin, for the STOMP
    scenarios; the StompLoad client logs in as guest (RabbitMQ refuses an empty login)."""
    name = "rabbitmq"
    protocols = ("stomp",)
    credentials = ("guest", "guest")

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.impl: q1.RabbitMQ | None = None
        self.port, self._pid = 0, 0

    def start(self) -> None:
        self.port = q1.free_port()
        self.impl = q1.RabbitMQ(self.workdir, plugins=("rabbitmq_stomp",),
                                conf=f"stomp.listeners.tcp.1 = 127.0.0.1:{self.port}\n")
        _, self._pid = self.impl.start()
        deadline = time.monotonic() + 30
        while not q1.port_open(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"RabbitMQ's STOMP port {self.port} not open in 30 s")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        return self._pid

    def stomp_port(self) -> int:
        return self.port

    def stop(self) -> None:
        if self.impl:
            self.impl.stop()
            self.impl = None

    def version(self) -> str:
        return q1.RabbitMQ(self.workdir).version().replace("rabbitmq_amqp1_0", "rabbitmq_stomp")


class HermodTarget:
    """Hermod from this work tree: the AMQP port is every protocol's port (the front door)."""
    name = "hermod"
    protocols = ("openwire", "stomp", "amqp")
    credentials = None

    def __init__(self, store: str, tree: str | None = None):
        self.store = store
        self.tree = tree  # another checkout imported first (`hermod@TREE`: before/after in one run)
        if tree:
            self.name = f"hermod@{Path(tree).name}"
        self.proc: HermodProc | None = None

    def start(self) -> None:
        self.proc = HermodProc("", store=self.store, pythonpath=self.tree)

    @property
    def pid(self) -> int:
        assert self.proc
        return self.proc.pid

    def openwire_url(self) -> str:
        return f"tcp://127.0.0.1:{self.amqp_port()}"

    def stomp_port(self) -> int:
        return self.amqp_port()

    def amqp_port(self) -> int:
        assert self.proc
        return self.proc.port

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None

    def version(self) -> str:
        if self.tree:
            return f"{self.name} (the checkout {self.tree}, {self.store} store)"
        return f"hermod {q1.git_describe(None)} ({self.store} store)"


def broker_usage(pid: int) -> tuple[float, float, float]:
    """CPU seconds so far, RSS and peak RSS (MiB) of the broker's processes."""
    pids = perfrun.process_tree(pid)
    hwm = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm += int(line.split()[1]) * 1024
        except OSError:
            pass
    return perfrun.cpu_seconds(pids), perfrun.rss_bytes(pids) / 2**20, hwm / 2**20


def drive(target, sc: Scenario, count: int, dest: str, producers: int, timeout: float) -> dict:
    """Run one scenario's load generator against the started target; its parsed result."""
    if sc.protocol == "openwire":
        return javaload.run("OpenWireLoad", ["--url", target.openwire_url(), "--scenario", sc.kind, "--count",
                                             str(count), "--dest", dest, "--producers", str(producers),
                                             "--timeout", str(int(timeout))], timeout)
    if sc.protocol == "stomp":
        login = ["--user", target.credentials[0], "--password", target.credentials[1]] if target.credentials else []
        return javaload.run("StompLoad", ["--port", str(target.stomp_port()), "--scenario", sc.kind, "--count",
                                          str(count), "--dest", dest, "--timeout", str(int(timeout)), *login],
                            timeout)
    flow = scenario_flow("q1", dest, 1, 1, 0, count)
    res = perfrun.run_flow("127.0.0.1", target.amqp_port(), flow, mode="throughput", size=1024, timeout=timeout)
    out: dict = {"msgs": res.received, "deliveries": res.received}
    if res.error:
        out["error"] = res.error
    if res.secs:
        out.update(secs=res.secs, msg_per_s=res.received / res.secs, deliveries_per_s=res.received / res.secs)
    return out


def measure(target, sc: Scenario, count: int, rep: int, producers: int, timeout: float) -> dict:
    dest = f"bench.{sc.name}.r{rep}"
    cpu0, _, _ = broker_usage(target.pid)
    res = drive(target, sc, count, dest, producers, timeout)
    cpu1, rss, hwm = broker_usage(target.pid)
    r = {"target": target.name, "scenario": sc.name, "rep": rep, "load": q1.load_average(), "count": count,
         "error": res.get("error")}
    if r["error"] and str(r["error"]).startswith("connect:"):
        r["not_served"] = True
    if not r["error"]:
        r.update(msg_per_s=round(res["msg_per_s"], 1), deliveries_per_s=round(res["deliveries_per_s"], 1),
                 secs=res.get("secs"), cpu_s_per_100k=round((cpu1 - cpu0) * 100000 / count, 3),
                 rss_mib=round(rss, 1), peak_rss_mib=round(hwm, 1))
    return r


def warm_up(target, protocols: set[str], timeout: float) -> None:
    """A short run per protocol on a throw-away destination (the JVM's JIT, Hermod's caches);
    its result is not kept, its failure (a protocol not served) not reported twice."""
    for name in ("openwire-q1", "stomp-t4", "amqp-q1"):
        sc = SCENARIOS[name]
        if sc.protocol in protocols and sc.protocol in target.protocols:
            drive(target, sc, 2000, f"bench.warmup.{name}", 1, timeout)


METRICS = (("msg_per_s", "msg/s", "{:,.0f}"), ("deliveries_per_s", "deliveries/s", "{:,.0f}"),
           ("cpu_s_per_100k", "broker CPU s per 100k messages", "{:.2f}"),
           ("rss_mib", "broker RSS MiB after the run", "{:.0f}"), ("peak_rss_mib", "broker peak RSS MiB", "{:.0f}"))


def cell(runs: list[dict], target: str, scenario: str, key: str, spec: str) -> str:
    mine = [r for r in runs if r["target"] == target and r["scenario"] == scenario]
    vals = [r[key] for r in mine if key in r]
    if vals:
        return spec.format(statistics.median(vals))
    if mine and all(r.get("not_served") for r in mine):
        return NOT_SERVED
    if mine:
        return "error"
    return "-"


def table(runs: list[dict], targets: list[str], scenarios: list[str]) -> str:
    """Medians per scenario and figure; the last column compares Hermod with the best of the
    others (the fastest, or for CPU and memory the leanest)."""
    others = [t for t in targets if not t.startswith("hermod")]  # hermod@TREE: shown, not compared
    ratio = "hermod" in targets and bool(others)
    lines = ["| scenario | figure (median) | " + " | ".join(targets) + (" | hermod / best other |" if ratio else " |"),
             "|---|---|" + "---|" * (len(targets) + ratio)]
    for scenario in scenarios:
        for key, label, spec in METRICS:
            if SCENARIOS[scenario].fanout == 1 and key == "deliveries_per_s":
                continue
            cells = [cell(runs, t, scenario, key, spec) for t in targets]
            if all(c == "-" for c in cells):
                continue
            row = f"| {scenario} | {label} | " + " | ".join(cells)
            if ratio:
                def median(t: str) -> float | None:
                    vals = [r[key] for r in runs if r["target"] == t and r["scenario"] == scenario and key in r]
                    return statistics.median(vals) if vals else None
                h = median("hermod")
                rest = [v for v in map(median, others) if v]
                best = (max(rest) if key.endswith("_per_s") else min(rest)) if rest else None
                row += f" | {h / best:.2f}x" if h and best else " | -"
            lines.append(row + " |")
    for r in runs:
        if r["error"]:
            what = NOT_SERVED if r.get("not_served") else "error"
            lines.append(f"- {r['target']} {r['scenario']} rep {r['rep']}: {what}: {r['error']}")
    loads = [float(r["load"].split()[0]) for r in runs if r["load"] != "?"]
    if loads:
        lines.append(f"\nLoad average (1 min) during the runs: {min(loads):.2f}-{max(loads):.2f} "
                     f"({q1.load_average()} at the end).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=100000, help="messages sent per run (t4: each to 4 subscribers)")
    ap.add_argument("--protocols", default="openwire,stomp,amqp")
    ap.add_argument("--scenarios", default="", help="names from " + ",".join(SCENARIOS) + " (default: all of --protocols)")
    ap.add_argument("--targets", default="classic,hermod,rabbitmq",
                    help="rabbitmq: STOMP scenarios only; hermod@TREE: Hermod from another checkout (before/after)")
    ap.add_argument("--hermod-store", default="sqlite", help="memory, sqlite or a store URL")
    ap.add_argument("--producers", type=int, default=8, help="psync: synchronous persistent producers")
    ap.add_argument("--classic-heap", default="512m", help="Classic's -Xms/-Xmx (Debian's default: 512M)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    ap.add_argument("--out", default=str(q1.RESULTS))
    args = ap.parse_args(argv)
    protocols = {p for p in args.protocols.split(",") if p}
    scenarios = [s for s in args.scenarios.split(",") if s] or [n for n, s in SCENARIOS.items() if s.protocol in protocols]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"openwire_stomp_bench: unknown scenarios {unknown}")
    protocols |= {SCENARIOS[s].protocol for s in scenarios}
    why = javaload.missing() if protocols & {"openwire", "stomp"} else None
    if why:
        raise SystemExit(f"openwire_stomp_bench: {why}")
    workdir = Path(tempfile.mkdtemp(prefix="hermod-owbench-"))
    targets: list = []
    for name in (n for n in args.targets.split(",") if n):
        if name == "classic":
            why = classic.missing()
            if why:
                print(f"openwire_stomp_bench: {why}: classic skipped", file=sys.stderr)
                continue
            targets.append(ClassicTarget(workdir, args.classic_heap))
        elif name == "hermod":
            targets.append(HermodTarget(args.hermod_store))
        elif name.startswith("hermod@"):
            targets.append(HermodTarget(args.hermod_store, name.split("@", 1)[1]))
        elif name == "rabbitmq":
            if not q1.RABBITMQ_SERVER.exists():
                print("openwire_stomp_bench: RabbitMQ not installed (make rabbitmq-deps): skipped", file=sys.stderr)
                continue
            targets.append(RabbitTarget(workdir))
        else:
            raise SystemExit(f"openwire_stomp_bench: unknown target {name!r}")
    targets = [t for t in targets if {SCENARIOS[s].protocol for s in scenarios} & set(t.protocols)]
    if not targets:
        raise SystemExit("openwire_stomp_bench: nothing to measure")
    print(f"load average at the start: {q1.load_average()}", file=sys.stderr, flush=True)
    runs: list[dict] = []
    for rep in range(args.reps):
        order = targets[rep % len(targets):] + targets[:rep % len(targets)]
        for target in order:
            target.start()
            try:
                warm_up(target, protocols, args.timeout)
                for name in scenarios:
                    sc = SCENARIOS[name]
                    if sc.protocol not in target.protocols:
                        continue
                    r = measure(target, sc, args.count, rep, args.producers, args.timeout)
                    runs.append(r)
                    if r.get("not_served"):
                        print(f"{target.name}: {NOT_SERVED}: {name} ({r['error']})", file=sys.stderr, flush=True)
                    else:
                        print(json.dumps(r), file=sys.stderr, flush=True)
            finally:
                target.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    versions = ", ".join(t.version() for t in targets)
    md = [f"# OpenWire and STOMP: Hermod and ActiveMQ Classic, {stamp}", "",
          f"{versions}. {args.reps} repetition(s), interleaved; {args.count:,} messages a run of 1 KiB "
          f"(t4: to 4 subscribers each)" + (f", psync {args.producers} producers" if "openwire-psync" in scenarios
                                            else "")
          + f"; Classic with KahaDB and -Xmx{args.classic_heap}. Load generators: OpenWireLoad (stock ActiveMQ "
          "5.17 JMS client), StompLoad (Classic's StompConnection, buffered socket), hermod perf (amqp-q1).", "",
          table(runs, [t.name for t in targets], scenarios), ""]
    (out / f"openwire-stomp-{stamp}.md").write_text("\n".join(md) + "\n")
    (out / f"openwire-stomp-{stamp}.json").write_text(json.dumps({"runs": runs, "versions": versions}, indent=1))
    print("\n".join(md))
    print(f"\nwritten: {out / f'openwire-stomp-{stamp}.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
