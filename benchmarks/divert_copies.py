"""What a divert copy costs (issue 18 goal 2: a copy <= 5 µs of broker CPU, 10 diverts >= 10k msg/s),
counted two ways, each with 0 and N diverts side by side in one run:

- `copy`: the copy alone, in process: route + admit + post_now of a real 1 KiB message (the
  producer's path after the bytes are read) into an address with N non-exclusive diverts, each
  to its own queue; nobody consumes (the queues are emptied between batches, off the clock).
  CPU time of the fastest batch of 1,000; per copy = (time with N - time with 0) / N.
- `fanout`: a real broker (`hermod run`, memory store) and `hermod perf --scenario fanout`'s
  flow: one producer, every copy consumed; originals per second and broker CPU per delivery.
- `fill`: the same broker and producer, nobody consuming (`--count` messages stay queued):
  originals per second and broker CPU per original; per copy = (CPU with N - with 0) / N.

    .venv/bin/python benchmarks/divert_copies.py [--diverts 10] [--count 20000] [--reps 3]
        [--size 1024] [--only copy|fanout|fill] [--base DIR]

`--base DIR` runs everything also against another checkout (a `git archive` of the commit to
compare), interleaved with this one, so machine noise hits both alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

BATCH = 1000  # messages routed per timed batch; the queues are emptied between batches


def copy_cost(diverts: int, count: int, size: int = 1024) -> float:
    """Seconds per original message for route + admit + post_now, in this process."""
    import tomllib

    from hermod.broker import config as config_mod
    from hermod.broker.app import Broker
    from hermod.broker.core.message import Message
    from hermod.broker.protocol import codec
    from hermod.broker.tools.perf import divert_config
    from hermod.broker.tools.perfclient import encode_message

    text = divert_config("fan", diverts) + '\n[[address]]\nname = "fan"\nrouting = ["anycast"]\n' \
        '[[address.queue]]\nname = "fan"\nrouting = "anycast"\n'
    broker = Broker(config_mod.parse(tomllib.loads(text)))
    broker.start()
    po = broker.postoffice
    encoded = encode_message(size, False)

    def one() -> None:
        message = Message(encoded, codec.Envelope(encoded), "fan", None, "bench", 0)
        plan = po.route(message, "fan", None)
        po.admit(plan)
        if not po.post_now(plan):
            raise RuntimeError("the plan needs the journal")

    for _ in range(200):  # creates the copy queues (auto-create), warms the caches
        one()
    batches = []
    for _ in range(max(1, count // BATCH)):
        for q in po.queues.values():
            q.take_waiting(lambda r: True)
        t0 = time.process_time()
        for _ in range(BATCH):
            one()
        batches.append((time.process_time() - t0) / BATCH)
    # The fastest batch's CPU time: the cost itself, with the least of the other processes
    # on this shared machine in it (their interference only ever adds).
    return min(batches)


def fanout(diverts: int, count: int, size: int, pythonpath: str | None, consume: bool = True) -> dict:
    from hermod.broker.tools import perfrun
    from hermod.broker.tools.perf import divert_config, scenario_flow
    from hermodproc import HermodProc

    with HermodProc(config=divert_config("perf.fan", diverts), pythonpath=pythonpath) as b:
        flow = scenario_flow("fanout", "perf.fan", 1, 1, diverts, count)
        if not consume:
            flow = perfrun.Flow(flow.targets, [], count)
        res = perfrun.run_flow("127.0.0.1", b.port, flow, mode="throughput", size=size, timeout=600,
                               cpu=perfrun.cpu_probe([b.pid]))
        if res.error:
            raise RuntimeError(res.error)
        if not consume:
            return {"msg_per_s": res.sent / res.secs, "cpu_us_per_original": res.cpu_s * 1e6 / res.sent}
        originals = res.received // max(1, flow.fanout)
        return {"msg_per_s": originals / res.secs, "cpu_us_per_delivery": res.cpu_s * 1e6 / res.received}


def run_copy_in(tree: str, diverts: int, count: int, size: int) -> float:
    """`copy_cost` in a fresh interpreter on `tree` (so two checkouts can be compared)."""
    out = subprocess.run([sys.executable, __file__, "--child-copy", str(diverts), "--count", str(count),
                          "--size", str(size)],
                         env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--diverts", type=int, default=10)
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--only", choices=["copy", "fanout", "fill"])
    p.add_argument("--base", help="another checkout to compare with, interleaved")
    p.add_argument("--child-copy", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_copy is not None:
        print(copy_cost(args.child_copy, args.count, args.size))
        return 0
    trees = {"this": str(ROOT)}
    if args.base:
        trees["base"] = str(Path(args.base).resolve())
    copy: dict = {(t, k): [] for t in trees for k in (0, args.diverts)}
    fan: dict = {(t, k): [] for t in trees for k in (0, args.diverts)}
    fill: dict = {(t, k): [] for t in trees for k in (0, args.diverts)}
    for _ in range(args.reps):
        for tree, path in trees.items():
            for k in (0, args.diverts):
                if args.only in (None, "copy"):
                    copy[tree, k].append(run_copy_in(path, k, args.count, args.size))
                if args.only in (None, "fill"):
                    fill[tree, k].append(fanout(k, args.count, args.size, path if tree != "this" else None, False))
                if args.only in (None, "fanout"):
                    fan[tree, k].append(fanout(k, args.count, args.size, path if tree != "this" else None))
    load = os.getloadavg()[0]
    summary: dict = {"load": round(load, 2), "diverts": args.diverts, "count": args.count, "size": args.size}
    for tree in trees:
        row: dict = {}
        if args.only in (None, "copy"):
            base0 = statistics.median(copy[tree, 0])
            basen = statistics.median(copy[tree, args.diverts])
            row["copy"] = {"route_us_0": round(base0 * 1e6, 2), f"route_us_{args.diverts}": round(basen * 1e6, 2),
                           "us_per_copy": round((basen - base0) * 1e6 / max(1, args.diverts), 2)}
        if args.only in (None, "fanout"):
            row["fanout"] = {k: {"msg_per_s": round(statistics.median(r["msg_per_s"] for r in fan[tree, k])),
                                 "cpu_us_per_delivery": round(statistics.median(
                                     r["cpu_us_per_delivery"] for r in fan[tree, k]), 2)}
                             for k in (0, args.diverts)}
        if args.only in (None, "fill"):
            cpu = {k: statistics.median(r["cpu_us_per_original"] for r in fill[tree, k]) for k in (0, args.diverts)}
            row["fill"] = {k: {"msg_per_s": round(statistics.median(r["msg_per_s"] for r in fill[tree, k])),
                               "cpu_us_per_original": round(cpu[k], 2)} for k in (0, args.diverts)}
            row["fill"]["us_per_copy"] = round((cpu[args.diverts] - cpu[0]) / max(1, args.diverts), 2)
        summary[tree] = row
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
