"""The event-loop trial (issue 18): Q1 and T4 against Hermod on asyncio's loop and on uvloop,
interleaved A/B (the order alternates per repetition), with the load average beside each run.

    .venv/bin/python benchmarks/loop_ab.py [--reps 5] [--count 50000] [--uvloop-path DIR]

`--uvloop-path`: a directory holding uvloop (`pip install --target DIR uvloop`) when it is not
in the venv; it is on both arms' PYTHONPATH so that only `[server] event_loop` differs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from hermod.broker.tools import perfrun  # noqa: E402
from hermod.broker.tools.perf import scenario_flow  # noqa: E402
from hermodproc import HermodProc  # noqa: E402
from q1 import load_average  # noqa: E402

LOOPS = ("asyncio", "uvloop")


def measure(loop: str, scenario: str, count: int, pythonpath: str | None) -> dict:
    with HermodProc(f'[server]\nevent_loop = "{loop}"\n', pythonpath=pythonpath) as b:
        flow = scenario_flow(scenario, "ab." + scenario, 1, None, 0, count)
        warm = scenario_flow(scenario, "ab." + scenario, 1, None, 0, min(count, 5000))
        perfrun.run_flow("127.0.0.1", b.port, warm, mode="throughput", size=1024, timeout=120)
        load = load_average()
        res = perfrun.run_flow("127.0.0.1", b.port, flow, mode="throughput", size=1024, timeout=300,
                               cpu=perfrun.cpu_probe([b.pid]))
    if res.error:
        raise RuntimeError(f"{loop} {scenario}: {res.error}")
    return {"loop": loop, "scenario": scenario, "msg_per_s": round(res.received / flow.fanout / res.secs),
            "deliveries_per_s": round(res.received / res.secs),
            "cpu_s_per_100k": round(res.cpu_s * 100000 / res.received, 3), "load": load}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--count", type=int, default=50000)
    ap.add_argument("--uvloop-path", default=None)
    ap.add_argument("--out", default=str(HERE / "results" / "loop_ab.json"))
    args = ap.parse_args(argv)
    runs = []
    for rep in range(args.reps):
        for scenario in ("q1", "t4"):
            for loop in (LOOPS if rep % 2 == 0 else LOOPS[::-1]):
                r = measure(loop, scenario, args.count, args.uvloop_path)
                r["rep"] = rep
                runs.append(r)
                print(json.dumps(r), flush=True)
    print("scenario loop      median msg/s  deliveries/s  CPU s/100k  (each run's load average)")
    for scenario in ("q1", "t4"):
        for loop in LOOPS:
            rs = [r for r in runs if r["scenario"] == scenario and r["loop"] == loop]
            print(f"{scenario:8} {loop:8} {statistics.median(r['msg_per_s'] for r in rs):12,.0f} "
                  f"{statistics.median(r['deliveries_per_s'] for r in rs):13,.0f} "
                  f"{statistics.median(r['cpu_s_per_100k'] for r in rs):11.2f}  "
                  + ", ".join(r["load"].split()[0] for r in rs))
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
