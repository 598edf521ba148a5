"""MQTT throughput, Hermod against Mosquitto 2.0, with mqtt.js as the load generator (not ours
to tune): QoS 0 and QoS 1 point to point, and fan-out 1 -> 100; broker CPU seconds per 100k
deliveries from /proc.

    python benchmarks/mqtt_bench.py [--count 20000] [--size 256]

Needs `make mqtt-deps` (mqtt.js in interop/mqttjs, /usr/sbin/mosquitto)."""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hermodproc import HermodProc  # noqa: E402

BENCH_JS = HERE.parent / "interop" / "mqttjs" / "bench.js"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run(port: int, pid: int, topic: str, count: int, size: int, qos: int, subs: int) -> dict:
    before = cpu_s(pid)
    out = subprocess.run(["node", str(BENCH_JS), f"mqtt://127.0.0.1:{port}", topic, str(count), str(size), str(qos),
                          str(subs)], capture_output=True, text=True, timeout=900)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = cpu_s(pid) - before
    if "seconds" not in result:
        return {"qos": qos, "subscribers": subs, "messages": count, "error": result.get("error"),
                "completed_subscribers": result.get("done")}
    deliveries = count * subs
    return {"qos": qos, "subscribers": subs, "messages": count, "msg_per_s": round(count / result["seconds"]),
            "deliveries_per_s": round(deliveries / result["seconds"]),
            "cpu_s_per_100k_deliveries": round(cpu / deliveries * 100_000, 2)}


def scenarios(port: int, pid: int, count: int, size: int, tag: str) -> list[dict]:
    rows = []
    for qos in (0, 1):
        rows.append(run(port, pid, f"{tag}/p2p/{qos}", count, size, qos, 1))
    rows.append(run(port, pid, f"{tag}/fan/1", max(1, count // 100), size, 1, 100))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--brokers", default="hermod,mosquitto")
    args = ap.parse_args()
    wanted = args.brokers.split(",")
    if "hermod" in wanted:
        hermod(args)
    if "mosquitto" in wanted and Path("/usr/sbin/mosquitto").exists():
        mosquitto(args)


def hermod(args) -> None:
    with HermodProc("") as b:
        for row in scenarios(b.port, b.pid, args.count, args.size, "h"):
            print(json.dumps({"broker": "hermod", **row}), flush=True)


def mosquitto(args) -> None:
    if True:
        work = Path(tempfile.mkdtemp(prefix="mosq-bench-"))
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        (work / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n")
        proc = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(work / "m.conf")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            for row in scenarios(port, proc.pid, args.count, args.size, "m"):
                print(json.dumps({"broker": "mosquitto", **row}), flush=True)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
