"""MQTT idle devices and retained topics: RSS per connection and per retained message, Hermod
against Mosquitto 2.0 (Debian's /usr/sbin/mosquitto, when installed), with a bystander's round
trip timed while they are held.

    python benchmarks/mqtt_idle.py [--connections 10000] [--retained 100000]

Each device is one raw MQTT 3.1.1 connection (CONNECT, CONNACK, then silence within its 600 s
keep-alive); RSS is read from /proc before and after. Prints one JSON line per broker."""
from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from hermodproc import HermodProc  # noqa: E402

from hermod.broker.mqtt import Connect, Publish, Subscribe, Subscription, encode  # noqa: E402


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def devices(port: int, n: int) -> list:
    held = []
    sem = asyncio.Semaphore(200)

    async def one(i: int) -> None:
        async with sem:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode(Connect(f"dev-{i}", 4, True, 600), 4))
            ack = await reader.readexactly(4)
            assert ack[:1] == b"\x20" and ack[3] == 0, ack
            held.append(writer)
    await asyncio.gather(*(one(i) for i in range(n)))
    return held


async def retain(port: int, n: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(Connect("retainer", 4, True, 600), 4))
    await reader.readexactly(4)
    for i in range(n):
        writer.write(encode(Publish(f"ret/{i // 1000}/{i}", b"v" * 16, 1, True, packet_id=i % 65535 + 1), 4))
        if i % 1000 == 999:
            await writer.drain()
    # the acknowledgements of the last thousand: enough that the broker has them all
    got = 0
    while got < n * 4:
        chunk = await reader.read(65536)
        if not chunk:
            break
        got += len(chunk)
    writer.close()


def round_trip_ms(port: int) -> float:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(encode(Connect("bystander", 4, True, 60), 4))
    s.recv(4)
    s.sendall(encode(Subscribe(1, [Subscription("by/t", 0)]), 4))
    s.recv(5)
    start = time.perf_counter()
    s.sendall(encode(Publish("by/t", b"ping"), 4))
    s.recv(64)
    took = (time.perf_counter() - start) * 1000
    s.close()
    return took


def measure(name: str, port: int, pid: int, connections: int, retained: int) -> dict:
    time.sleep(0.5)
    base = rss_kb(pid)
    loop = asyncio.new_event_loop()
    held = loop.run_until_complete(devices(port, connections))
    time.sleep(1)
    with_conns = rss_kb(pid)
    rt = round_trip_ms(port)
    started = time.perf_counter()
    loop.run_until_complete(retain(port, retained))
    retain_s = time.perf_counter() - started
    time.sleep(1)
    with_retained = rss_kb(pid)
    for w in held:
        w.close()
    loop.close()
    return {"broker": name, "connections": connections, "rss_base_mb": round(base / 1024, 1),
            "rss_per_connection_kb": round((with_conns - base) / max(1, connections), 2),
            "bystander_round_trip_ms": round(rt, 2), "retained": retained,
            "retained_publish_s": round(retain_s, 2),
            "rss_per_retained_kb": round((with_retained - with_conns) / max(1, retained), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--retained", type=int, default=100_000)
    args = ap.parse_args()
    with HermodProc("[server]\nmax_connections = 20000\n") as b:
        print(json.dumps(measure("hermod", b.port, b.pid, args.connections, args.retained)), flush=True)
    if Path("/usr/sbin/mosquitto").exists():
        work = Path(tempfile.mkdtemp(prefix="mosq-bench-"))
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        (work / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_keepalive 65535\n")
        proc = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(work / "m.conf")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            print(json.dumps(measure("mosquitto", port, proc.pid, args.connections, args.retained)), flush=True)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
