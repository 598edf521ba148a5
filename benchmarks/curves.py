"""Issue 18 item 5: how Hermod's costs grow with the work, one curve a function. Each point is a
`hermod perf` run (in this process, over perfrun) against a private broker, with msg/s,
deliveries/s, the broker's CPU µs per message and per delivery, its RSS and the load average.

    .venv/bin/python benchmarks/curves.py [--quick] [--only consumers,diverts] [--store memory|sqlite|URL]

Curves (full / `--quick` points):
  consumers      q1 with 1-100 competing consumers on one queue
  queues         1-1,000 queues, each with its own producer and consumer (250 links a connection)
  body_size      q1 with 1 B-1 MiB bodies (fewer messages for large bodies: ~200 MB a point)
  diverts        fanout with 0-10 non-exclusive diverts, every copy consumed
  subscriptions  t4 with one subscriber, beside 0-100,000 idle subscriptions on other topics of
                 the same tree (half exact names, half `*`/`#` wildcards that do not match)
  backlog        fill a queue with 10k-1M messages, drain it, then fill again and drain with a
                 selector consumer (`n = 1`, matching every message)
  idle_conns     0-10,000 idle connections (open + one session) held by a child process: the
                 broker's RSS per connection, and q1 beside them
`--quick` is a few points with small counts: it proves the tooling (tests/tools/test_perf_smoke.py),
not the speed. Results: benchmarks/results/curves-*.json, a Markdown table and one PNG a curve.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from hermod.broker.tools import perfrun  # noqa: E402
from hermod.broker.tools.perf import divert_config, scenario_flow  # noqa: E402
from hermod.broker.tools.perfrun import Flow  # noqa: E402
from hermodproc import HermodProc  # noqa: E402
from q1 import load_average, wait_for_line  # noqa: E402

RESULTS = HERE / "results"
LINKS_PER_CONNECTION = 250  # under the broker's max_links_per_connection (1024)


def hold_timeout(n: int) -> float:
    """How long a Holder may take to open `n` connections or subscriptions: generous, because a
    broker whose attach cost grows with what is there (see the curve's `open_s_per_1k`) is slow
    here, and that is what the curve is for."""
    return 60 + n / 20



class Curve:
    """The points of one curve, as they are measured."""

    def __init__(self, name: str, x_label: str, quick: bool):
        self.name, self.x_label, self.quick = name, x_label, quick
        self.points: list[dict] = []

    def add(self, x, res: perfrun.Result, flow: Flow, series: str = "", **extra) -> dict:
        if res.error:
            raise RuntimeError(f"curve {self.name} at {x} ({series or 'main'}): {res.error}")
        msgs = res.sent if not flow.sources else res.received // max(1, flow.fanout)
        point = {"x": x, "series": series, "msgs": msgs, "deliveries": res.received, "secs": round(res.secs, 3),
                 "msg_per_s": round(msgs / res.secs, 1) if res.secs else 0.0,
                 "deliveries_per_s": round(res.received / res.secs, 1) if res.secs else 0.0,
                 "load": load_average()}
        if res.cpu_s is not None and msgs:
            point["cpu_us_per_msg"] = round(res.cpu_s * 1e6 / msgs, 2)
            if res.received:
                point["cpu_us_per_delivery"] = round(res.cpu_s * 1e6 / res.received, 2)
        if res.rss_bytes is not None:
            point["rss_mib"] = round(res.rss_bytes / 2**20, 1)
        point.update(extra)
        self.points.append(point)
        print(f"  {self.name} {series} {self.x_label}={x}: {point['msg_per_s']:,.0f} msg/s "
              f"{point.get('cpu_us_per_msg', '?')} µs CPU/msg", file=sys.stderr, flush=True)
        return point

    def as_dict(self) -> dict:
        return {"name": self.name, "x_label": self.x_label, "quick": self.quick, "points": self.points}


def _run(broker: HermodProc, flow: Flow, *, size: int = 1024, properties: dict | None = None, timeout: float = 600):
    return perfrun.run_flow("127.0.0.1", broker.port, flow, mode="throughput", size=size, timeout=timeout,
                            cpu=perfrun.cpu_probe([broker.pid]), rss=perfrun.rss_probe([broker.pid]),
                            properties=properties)


def _warm(broker: HermodProc) -> None:
    res = _run(broker, scenario_flow("q1", "curve.warmup", 1, 1, 0, 2000))
    if res.error:
        raise RuntimeError(f"warm-up: {res.error}")


def _sweep(name: str, x_label: str, quick: bool, store: str, xs: list, make, config: str = "") -> dict:
    """A curve whose points are plain runs on one broker: `make(x)` gives (flow, body size)."""
    curve = Curve(name, x_label, quick)
    with HermodProc(config=config, store=store) as b:
        _warm(b)
        for x in xs:
            flow, size = make(x)
            curve.add(x, _run(b, flow, size=size), flow)
    return curve.as_dict()


def consumers(quick: bool, store: str) -> dict:
    count = 2000 if quick else 100000
    return _sweep("consumers", "consumers", quick, store, [1, 4] if quick else [1, 2, 5, 10, 20, 50, 100],
                  lambda n: (scenario_flow("q1", f"curve.consumers{n}", 1, n, 0, count), 1024))


def queues(quick: bool, store: str) -> dict:
    count = 2000 if quick else 100000

    def flow(n: int):
        names = [f"curve.q{n}.{i}" for i in range(n)]
        return Flow(names, [(a, None) for a in names], max(count, n), links_per_connection=LINKS_PER_CONNECTION), 1024
    return _sweep("queues", "queues", quick, store, [1, 10] if quick else [1, 10, 100, 1000], flow)


def body_size(quick: bool, store: str) -> dict:
    budget = 2_000_000 if quick else 200_000_000

    def flow(size: int):
        count = max(50 if quick else 200, min(2000 if quick else 100000, budget // max(size, 1)))
        return scenario_flow("q1", f"curve.size{size}", 1, 1, 0, count), size
    return _sweep("body_size", "body bytes", quick, store,
                  [1, 1024, 65536] if quick else [1, 100, 1024, 10240, 102400, 1048576], flow)


def diverts(quick: bool, store: str) -> dict:
    count = 1000 if quick else 30000
    ks = [0, 2] if quick else [0, 1, 2, 5, 10]
    return _sweep("diverts", "diverts", quick, store, ks,
                  lambda k: (scenario_flow("fanout", f"curve.fan{k}", 1, 1, k, count), 1024),
                  config="".join(divert_config(f"curve.fan{k}", k) for k in ks))


class Holder:
    """A child process holding idle connections (`conns`) or idle subscriptions (`subs`) open
    and answering heartbeats, so that the measuring loop stays as it is."""

    def __init__(self, broker: HermodProc, what: str, n: int, tag: str):
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--hold", what, str(n),
                                      str(broker.port), tag], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            m = wait_for_line(self.proc, r"^holding \d+ after ([\d.]+) s", hold_timeout(n))
        except BaseException:
            self.stop()
            raise
        self.open_s = float(m.group(1))  # how long the broker took to accept them all

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)


def _hold(what: str, n: int, port: int, tag: str) -> int:
    """The Holder's side: open, say so, and keep the connections served until terminated."""
    from hermod.broker.tools.perfclient import Client, Consumer

    client = Client("127.0.0.1", port)
    start = time.monotonic()
    deadline = start + hold_timeout(n)
    if what == "conns":
        from cproton_ffi import lib
        eps = [client.connect(f"idle{i}") for i in range(n)]
        client.wait_for(lambda: all(lib.pn_connection_state(e.conn) & lib.PN_REMOTE_ACTIVE for e in eps),
                        deadline, "the idle connections' open")
    else:
        subs, ep = [], None
        for i in range(n):
            if i % LINKS_PER_CONNECTION == 0:
                ep = client.connect(f"subs{i}")
            address = f"topic://curve.other.{tag}.{i}" if i % 2 == 0 else f"topic://curve.w{tag}.{i}.#"
            subs.append(Consumer(ep, address, 0, False, name=f"idle-sub-{i}"))
        client.wait_for(lambda: all(c.opened for c in subs), deadline, "the idle subscriptions' attach")
    print(f"holding {n} after {time.monotonic() - start:.2f} s", flush=True)
    while not client.errors():
        client.turn(1.0)
    print(client.errors(), flush=True)
    return 1


def subscriptions(quick: bool, store: str) -> dict:
    curve = Curve("subscriptions", "idle subscriptions", quick)
    count = 2000 if quick else 50000
    holders, held = [], 0
    with HermodProc(store=store) as b:
        try:
            _warm(b)
            base_rss = perfrun.rss_probe([b.pid])()
            for n in ([0, 100] if quick else [0, 100, 1000, 10000, 100000]):
                extra = {}
                if n > held:
                    holders.append(Holder(b, "subs", n - held, str(len(holders))))
                    extra["open_s_per_1k"] = round(holders[-1].open_s * 1000 / (n - held), 3)
                    held = n
                if n:  # the subscriptions' queues and links, and their share of the holder's connections
                    extra["rss_kib_per_sub"] = round((perfrun.rss_probe([b.pid])() - base_rss) / 1024 / n, 1)
                flow = scenario_flow("t4", "curve.sub.topic", 1, 1, 0, count)
                curve.add(n, _run(b, flow), flow, **extra)
        finally:
            for h in holders:
                h.stop()
    return curve.as_dict()


def backlog(quick: bool, store: str) -> dict:
    curve = Curve("backlog", "backlog messages", quick)
    props = {"n": 1}
    with HermodProc(store=store) as b:
        _warm(b)
        for n in ([2000] if quick else [10000, 100000, 1000000]):
            for series, selector in (("plain", None), ("selector", "n = 1")):
                address = f"curve.backlog{n}.{series}"
                fill = Flow([address], [], n)
                curve.add(n, _run(b, fill, properties=props), fill, series=f"fill {series}")
                drain = Flow([], [(address, selector)], n)
                curve.add(n, _run(b, drain), drain, series=f"drain {series}")
    return curve.as_dict()


def idle_conns(quick: bool, store: str) -> dict:
    curve = Curve("idle_conns", "idle connections", quick)
    count = 2000 if quick else 50000
    holders, held = [], 0
    config = "[server]\nmax_connections = 11000\n"
    with HermodProc(config=config, store=store) as b:
        try:
            _warm(b)
            base_rss = perfrun.rss_probe([b.pid])()
            for n in ([0, 200] if quick else [0, 1000, 10000]):
                extra = {}
                if n > held:
                    holders.append(Holder(b, "conns", n - held, str(len(holders))))
                    extra["open_s_per_1k"] = round(holders[-1].open_s * 1000 / (n - held), 3)
                    held = n
                rss_now = perfrun.rss_probe([b.pid])()
                extra["rss_idle_mib"] = round(rss_now / 2**20, 1)
                if n:
                    extra["rss_kib_per_conn"] = round((rss_now - base_rss) / 1024 / n, 1)
                flow = scenario_flow("q1", f"curve.idle{n}", 1, 1, 0, count)
                curve.add(n, _run(b, flow), flow, **extra)
        finally:
            for h in holders:
                h.stop()
    return curve.as_dict()


CURVES = {f.__name__: f for f in (consumers, queues, body_size, diverts, subscriptions, backlog, idle_conns)}


def markdown(curves: list[dict]) -> str:
    lines = []
    for c in curves:
        lines += [f"### {c['name']}", "",
                  f"| {c['x_label']} | series | msg/s | deliveries/s | CPU µs/msg | CPU µs/delivery | RSS MiB | other | load |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for p in c["points"]:
            other = ", ".join(f"{k}={p[k]}" for k in ("rss_kib_per_conn", "rss_kib_per_sub", "rss_idle_mib", "open_s_per_1k") if k in p)
            lines.append(f"| {p['x']:,} | {p['series']} | {p['msg_per_s']:,.0f} | {p['deliveries_per_s']:,.0f} | "
                         f"{p.get('cpu_us_per_msg', '')} | {p.get('cpu_us_per_delivery', '')} | "
                         f"{p.get('rss_mib', '')} | {other} | {p['load']} |")
        lines.append("")
    return "\n".join(lines)


def charts(curves: list[dict], out: Path, stamp: str) -> list[Path]:
    """One PNG a curve: msg/s (left axis) and broker CPU µs per message (right), log x where the
    points span decades."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for c in curves:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax2 = ax.twinx()
        for i, series in enumerate(dict.fromkeys(p["series"] for p in c["points"])):
            pts = [p for p in c["points"] if p["series"] == series]
            xs = [p["x"] for p in pts]
            ax.plot(xs, [p["msg_per_s"] for p in pts], marker="o", color=f"C{i}",
                    label=f"{series} msg/s" if series else "msg/s")
            ax2.plot(xs, [p.get("cpu_us_per_msg", float("nan")) for p in pts], marker="x", linestyle="--",
                     color=f"C{i}", label=f"{series} CPU µs/msg" if series else "CPU µs/msg")
        positive = [p["x"] for p in c["points"] if p["x"] > 0]
        if positive and (max(positive) >= 100 * min(positive) or (len(positive) < len(c["points"])
                                                                  and max(positive) >= 100)):
            ax.set_xscale("symlog", linthresh=1)  # the points span decades
        ax.set_xlabel(c["x_label"])
        ax.set_ylabel("msg/s")
        ax2.set_ylabel("broker CPU µs per message")
        ax.set_ylim(bottom=0)
        ax2.set_ylim(bottom=0)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="best")
        ax.set_title(f"Hermod: {c['name']}" + (" (--quick)" if c["quick"] else ""))
        fig.tight_layout()
        path = out / f"curve-{c['name']}-{stamp}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def run_curves(names: list[str], quick: bool, store: str) -> list[dict]:
    out = []
    for name in names:
        print(f"curve {name} ({'quick' if quick else 'full'}, store {store})", file=sys.stderr, flush=True)
        out.append(dict(CURVES[name](quick, store), store=store))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few points, small counts (proves the tooling)")
    ap.add_argument("--only", default=",".join(CURVES), help="comma-separated curves (default: all)")
    ap.add_argument("--store", default="memory", help="memory, sqlite or a store URL (default %(default)s)")
    ap.add_argument("--out", default=str(RESULTS), help="results directory (default %(default)s)")
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("--hold", nargs=4, metavar=("WHAT", "N", "PORT", "TAG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hold:
        what, n, port, tag = args.hold
        return _hold(what, int(n), int(port), tag)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CURVES]
    if unknown:
        print(f"curves: unknown curve {', '.join(unknown)} (known: {', '.join(CURVES)})", file=sys.stderr)
        return 2
    curves = run_curves(names, args.quick, args.store)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"curves-{stamp}.json").write_text(json.dumps(curves, indent=1))
    (out / f"curves-{stamp}.md").write_text(markdown(curves))
    pngs = [] if args.no_charts else charts(curves, out, stamp)
    print(json.dumps({"json": str(out / f"curves-{stamp}.json"), "markdown": str(out / f"curves-{stamp}.md"),
                      "charts": [str(p) for p in pngs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
