"""`make bench`: the issue 18 scenarios against Hermod (memory store, SQLite, PostgreSQL on a
private cluster) and, where installed (benchmarks/setup.sh), RabbitMQ and the Proton C example
broker (q1 and lat only), in one run, interleaved: each repetition starts every broker in turn
(the order rotates), runs its scenarios and stops it, so that the shared machine's drift hits
all alike. Then the curves (benchmarks/curves.py). Writes benchmarks/results/bench-STAMP.md
(a table of medians, the load average of every run and the echo floor), .json (every run) and
the curves' PNG charts.

    .venv/bin/python benchmarks/bench.py [--reps 3] [--count 100000] [--quick] [--no-curves]
        [--targets hermod-memory,hermod-sqlite,hermod-postgresql,rabbitmq,proton-c] [--setup]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import curves  # noqa: E402
import q1  # noqa: E402
from hermod.broker.tools import perfrun  # noqa: E402
from hermod.broker.tools.perf import divert_config, scenario_flow  # noqa: E402
from hermod.broker.tools.perfecho import echo_floor, percentile  # noqa: E402
from hermodproc import HermodProc  # noqa: E402

FANOUT_DIVERTS = 10
ALL_SCENARIOS = ("q1", "q1d", "t4", "lat", "fanout")


class HermodTarget:
    scenarios = ALL_SCENARIOS

    def __init__(self, store: str, pg=None):
        self.name = f"hermod-{store}"
        self.store, self.pg, self.n, self.proc = store, pg, 0, None

    def start(self) -> tuple[int, int]:
        self.n += 1
        url = self.pg.create_database(f"bench{self.n}") if self.store == "postgresql" else self.store
        self.proc = HermodProc(divert_config("bench.fanout", FANOUT_DIVERTS), store=url)
        return self.proc.port, self.proc.pid

    def address(self, scenario: str) -> str:
        return f"bench.{scenario}"

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None


class OtherTarget:
    """RabbitMQ or the Proton C broker, as benchmarks/q1.py starts them."""

    def __init__(self, cls, workdir: Path, scenarios):
        self.impl, self.name, self.scenarios = cls(workdir), cls.name, scenarios

    def start(self) -> tuple[int, int]:
        return self.impl.start()

    def address(self, scenario: str) -> str:
        if self.name == "rabbitmq" and scenario == "t4":
            return "/topic/bench.t4"
        return self.impl.address(f"bench.{scenario}")

    def stop(self) -> None:
        self.impl.stop()


def available_targets(names: list[str], workdir: Path, pg) -> list:
    out = []
    for name in names:
        if name.startswith("hermod-"):
            store = name.split("-", 1)[1]
            if store == "postgresql" and pg is None:
                print("bench: PostgreSQL server binaries not found: hermod-postgresql skipped", file=sys.stderr)
                continue
            out.append(HermodTarget(store, pg))
        elif name == "rabbitmq":
            if q1.RABBITMQ_SERVER.exists():
                out.append(OtherTarget(q1.RabbitMQ, workdir, ("q1", "q1d", "t4", "lat")))
            else:
                print("bench: RabbitMQ not installed (benchmarks/setup.sh): skipped", file=sys.stderr)
        elif name == "proton-c":
            if q1.PROTON_C_BROKER.exists():
                out.append(OtherTarget(q1.ProtonC, workdir, ("q1", "lat")))
            else:
                print("bench: Proton C broker not built (benchmarks/setup.sh): skipped", file=sys.stderr)
        else:
            raise SystemExit(f"bench: unknown target {name!r}")
    return out


def run_scenario(target, scenario: str, port: int, pid: int, count: int, lat_count: int) -> dict:
    address = target.address(scenario)
    latency = scenario == "lat"
    if scenario == "fanout":
        flow = scenario_flow("fanout", address, 1, 1, FANOUT_DIVERTS, max(100, count // 10))
    elif scenario == "t4":
        flow = scenario_flow("t4", address, 1, 4, 0, max(100, count // 2))
    else:
        flow = scenario_flow("q1", address, 1, 1, 0, lat_count if latency else count)
    res = perfrun.run_flow("127.0.0.1", port, flow, mode="latency" if latency else "throughput", size=1024,
                           durable=scenario == "q1d", rate=1000.0, warmup=100 if latency else 0, timeout=600,
                           cpu=perfrun.cpu_probe([pid]), rss=perfrun.rss_probe([pid]))
    r = {"target": target.name, "scenario": scenario, "load": q1.load_average(), "error": res.error,
         "msgs": res.received // flow.fanout, "deliveries": res.received}
    if res.secs:
        r.update(msg_per_s=round(res.received / flow.fanout / res.secs, 1),
                 deliveries_per_s=round(res.received / res.secs, 1))
    if res.cpu_s is not None and res.received:
        r["cpu_s_per_100k"] = round(res.cpu_s * 100000 / res.received, 3)
    if res.rss_bytes is not None:
        r["rss_mib"] = round(res.rss_bytes / 2**20, 1)
    if latency and res.latencies_ns:
        lat = sorted(x / 1e6 for x in res.latencies_ns)
        r.update(p50_ms=round(percentile(lat, 50), 3), p99_ms=round(percentile(lat, 99), 3))
    return r


def warm_up(port: int, target) -> None:
    flow = scenario_flow("q1", target.address("q1"), 1, 1, 0, 5000)
    perfrun.run_flow("127.0.0.1", port, flow, mode="throughput", size=1024, timeout=120)


METRICS = (("msg_per_s", "msg/s", "{:,.0f}"), ("deliveries_per_s", "deliveries/s", "{:,.0f}"),
           ("cpu_s_per_100k", "broker CPU s per 100k deliveries", "{:.2f}"), ("rss_mib", "broker RSS MiB at the end", "{:.0f}"),
           ("p50_ms", "p50 ms", "{:.3f}"), ("p99_ms", "p99 ms", "{:.3f}"))


def table(runs: list[dict], targets: list[str], floors: list[dict]) -> str:
    lines = ["| scenario | figure (median) | " + " | ".join(targets) + " |",
             "|---|---|" + "---|" * len(targets)]
    for scenario in ALL_SCENARIOS:
        for key, label, spec in METRICS:
            cells, any_value = [], False
            for t in targets:
                vals = [r[key] for r in runs if r["target"] == t and r["scenario"] == scenario and key in r
                        and not r["error"]]
                any_value = any_value or bool(vals)
                cells.append(spec.format(statistics.median(vals)) if vals else "-")
            if any_value:
                lines.append(f"| {scenario} | {label} | " + " | ".join(cells) + " |")
    if floors:
        lines.append("")
        lines.append("Echo floor (no broker, same rate and size), median of the repetitions: p50 "
                     f"{statistics.median(f['p50_ms'] for f in floors):.3f} ms, p99 "
                     f"{statistics.median(f['p99_ms'] for f in floors):.3f} ms.")
    errors = [r for r in runs if r["error"]]
    for r in errors:
        lines.append(f"- error: {r['target']} {r['scenario']}: {r['error']}")
    loads = [float(r["load"].split()[0]) for r in runs if r["load"] != "?"]
    if loads:
        lines.append(f"\nLoad average (1 min) during the runs: {min(loads):.2f}-{max(loads):.2f}.")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=100000, help="q1/q1d messages (t4: half, fanout: a tenth)")
    ap.add_argument("--lat-count", type=int, default=10000, help="lat: messages at 1,000 msg/s")
    ap.add_argument("--targets", default="hermod-memory,hermod-sqlite,hermod-postgresql,rabbitmq,proton-c")
    ap.add_argument("--scenarios", default=",".join(ALL_SCENARIOS))
    ap.add_argument("--quick", action="store_true", help="1 repetition, small counts, quick curves")
    ap.add_argument("--no-curves", action="store_true")
    ap.add_argument("--setup", action="store_true", help="run benchmarks/setup.sh first (installs what is compared)")
    ap.add_argument("--out", default=str(q1.RESULTS))
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.count, args.lat_count = 1, min(args.count, 3000), min(args.lat_count, 500)
    if args.setup:
        import subprocess
        subprocess.run(["bash", str(HERE / "setup.sh")], check=True)
    scenarios = [s for s in args.scenarios.split(",") if s]
    workdir = Path(tempfile.mkdtemp(prefix="hermod-bench-"))
    pg = None
    names = [n for n in args.targets.split(",") if n]
    if "hermod-postgresql" in names:
        sys.path.insert(0, str(ROOT / "tests" / "store"))
        try:
            from pgcluster import PgCluster
            pg = PgCluster(durable=True)
            pg.__enter__()
        except RuntimeError as e:
            print(f"bench: {e}", file=sys.stderr)
            pg = None
    runs, floors = [], []
    try:
        targets = available_targets(names, workdir, pg)
        for rep in range(args.reps):
            order = targets[rep % len(targets):] + targets[:rep % len(targets)]
            for target in order:
                port, pid = target.start()
                try:
                    warm_up(port, target)
                    for scenario in scenarios:
                        if scenario in target.scenarios:
                            r = run_scenario(target, scenario, port, pid, args.count, args.lat_count)
                            r["rep"] = rep
                            runs.append(r)
                            print(json.dumps(r), file=sys.stderr, flush=True)
                finally:
                    target.stop()
            if "lat" in scenarios:
                floors.append(echo_floor(1000.0, args.lat_count, 1024))
    finally:
        if pg is not None:
            pg.__exit__(None, None, None)
    curve_data = [] if args.no_curves else curves.run_curves(list(curves.CURVES), args.quick, "memory")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    md = [f"# Hermod bench {stamp} ({q1.git_describe(None)})", "",
          f"{args.reps} repetition(s), interleaved; 1 KiB bodies, unsettled sends; q1/q1d {args.count:,} messages, "
          f"t4 {max(100, args.count // 2):,} to 4 subscribers, fanout {max(100, args.count // 10):,} with "
          f"{FANOUT_DIVERTS} diverts, lat {args.lat_count:,} at 1,000 msg/s.", "",
          table(runs, [t.name for t in targets], floors), ""]
    if curve_data:
        md += ["## Curves (hermod, memory store)", "", curves.markdown(curve_data)]
        pngs = curves.charts(curve_data, out, stamp)
        md += [f"![{p.stem}]({p.name})" for p in pngs]
    (out / f"bench-{stamp}.md").write_text("\n".join(md) + "\n")
    (out / f"bench-{stamp}.json").write_text(json.dumps({"runs": runs, "echo_floor": floors, "curves": curve_data},
                                                        indent=1))
    print("\n".join(md))
    print(f"\nwritten: {out / f'bench-{stamp}.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
