"""Floods (issue 12): for each hostile flood, a fresh broker (in-memory store), the flood run by a
thread of raw AMQP clients (tests/hostile/raw_amqp.py) for `--seconds`, and meanwhile a polite
bystander doing send+receive round trips on its own queue. Reports the broker's RSS (VmRSS from
/proc, sampled; and the peak VmHWM) and the bystander's round-trip p50/p99/max, then a table.

    .venv/bin/python benchmarks/floods.py [--seconds 10] [--only NAME ...] [--backlog 1000000]

The last row: a 1,000,000-message backlog (100-byte bodies, in-memory store, so nothing is
durable on disk) behind a consumer whose selector matches none of it, while a producer keeps
adding to that queue. A benchmark, not a test: nothing is asserted; errors are counted.
Not part of `make test`; `make floods` runs it.
"""
from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for helper_dir in (ROOT, ROOT / "tests", ROOT / "tests" / "wire", ROOT / "tests" / "hostile"):
    sys.path.insert(0, str(helper_dir))

from hermod_testing import BrokerProcess  # noqa: E402
from proton import Described, Message, symbol, ubyte, uint, ulong  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402
from raw_amqp import (  # noqa: E402
    BOMBS,
    SASL_HEADER,
    Closed,
    RawClient,
    described,
    flow_fields,
    message_bytes,
    performative,
    source,
    transfer,
)

from hermod.broker.tools.perfclient import Client, Producer, encode_message  # noqa: E402

SELECTOR = ulong(0x0000468C00000004)


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def drain_frames(client: RawClient, until, bound: float = 10.0) -> None:
    deadline = time.monotonic() + bound
    while not until() and time.monotonic() < deadline:
        try:
            client.read_frame(max(0.01, deadline - time.monotonic()))
        except TimeoutError:
            return


# -- the floods: each runs until `stop` is set ----------------------------------------------------


def credit_ignored(address: str, stop: threading.Event) -> None:
    while not stop.is_set():
        with RawClient(address) as c:
            c.handshake("credit-ignorer")
            c.begin()
            c.attach_sender(0, "flood.credit")
            flow = c.expect("flow", lambda f: f.link == "snd-0")
            credit = int(flow.field(6))
            c.send(b"".join(transfer(0, i, message_bytes(f"c-{i}")) for i in range(2 * credit + 1000)))
            drain_frames(c, lambda: any(f.name == "detach" for f in c.frames))


def never_reads(address: str, stop: threading.Event) -> None:
    filler = BlockingConnection(f"amqp://{address}")
    sender = filler.create_sender("flood.unread")
    for i in range(300):
        sender.send(Message(body=b"x" * 65536))
    filler.close()
    c = RawClient(address)
    c.handshake("never-reads")
    c.begin()
    c.attach_receiver(0, "flood.unread", credit=1_000_000)
    stop.wait()
    c.close()


def many_links(address: str, stop: threading.Event) -> None:
    with RawClient(address, timeout=60) as c:
        c.handshake("link-hoarder")
        c.begin()
        c.send(b"".join(performative("attach", [f"l-{h}", uint(h), True, ubyte(0), ubyte(0),
                                                source("flood.links"), described(0x29, [])])
                        for h in range(10_000)))
        stop.wait()


def session_churn(address: str, stop: threading.Event) -> None:
    with RawClient(address) as c:
        c.handshake("churner")
        while not stop.is_set():
            c.send(b"".join(performative("begin", [None, uint(0), uint(100), uint(100)], ch)
                            + performative("end", [], ch) for ch in range(100)))
            ends = 0
            while ends < 100:
                ends += c.read_frame().name == "end"


def slow_loris(address: str, stop: threading.Event) -> None:
    import socket
    host, port = address.rsplit(":", 1)
    trickle = SASL_HEADER + struct.pack(">IBBH", 400, 2, 1, 0) + b"\x00" * 392
    sockets = [socket.create_connection((host, int(port))) for _ in range(200)]
    position = 0
    while not stop.wait(0.2):
        for i, s in enumerate(sockets):
            try:
                s.send(trickle[position % len(trickle):][:1])
            except OSError:
                sockets[i] = socket.create_connection((host, int(port)))
        position += 1
    for s in sockets:
        s.close()


def big_requests(address: str, stop: threading.Event) -> None:
    composite = ",".join(f"flood.part.{i}" for i in range(10_000))
    selector = ("color = 'red' OR " * 60_000)[:1_000_000 - 11] + "color = 'x'"
    attaches = [
        ["big-name", uint(0), False, ubyte(0), ubyte(0), source("x"), described(0x29, ["n" * 1_000_000]),
         None, None, uint(0)],
        ["big-composite", uint(0), False, ubyte(0), ubyte(0), source("x"), described(0x29, [composite]),
         None, None, uint(0)],
        ["big-selector", uint(0), True, ubyte(0), ubyte(0), source("flood.sel", filter={
            symbol("jms-selector"): Described(SELECTOR, selector)}), described(0x29, [])],
    ]
    while not stop.is_set():
        for fields in attaches:
            with RawClient(address, timeout=30) as c:
                c.handshake("big", max_frame=4 << 20)
                c.begin()
                c.send(performative("attach", fields))
                try:
                    drain_frames(c, lambda: any(f.name in ("detach", "flow") for f in c.frames), 30)
                except Closed:
                    pass


def decode_bombs(address: str, stop: threading.Event) -> None:
    while not stop.is_set():
        for payload in BOMBS.values():
            with RawClient(address, timeout=30) as c:
                c.handshake("bomber", max_frame=4 << 20)
                c.begin()
                c.attach_sender(0, "flood.bomb")
                c.expect("flow", lambda f: f.link == "snd-0")
                c.send(transfer(0, 0, payload))
                try:
                    drain_frames(c, lambda: any(f.name in ("disposition", "detach", "close") for f in c.frames), 30)
                except Closed:
                    pass


def greedy_consumer(address: str, stop: threading.Event) -> None:
    host, port = address.rsplit(":", 1)
    client = Client(host, int(port))
    producer = Producer(client.connect("fill"), "flood.greedy", encode_message(1024, False), 20_000,
                        presettled=False)
    client.wait_for(lambda: producer.opened, time.monotonic() + 30, "attach")
    while producer.acked < 20_000:
        producer.send(20_000)
        client.turn(0.01)
    client.close()
    c = RawClient(address)
    c.handshake("greedy")
    c.begin()
    c.attach_receiver(0, "flood.greedy", credit=0xFFFFFFFF)
    while not stop.is_set():  # reads everything, settles nothing
        try:
            c.read_frame(0.2)
        except TimeoutError:
            continue
    c.close()


def selector_backlog(count: int):
    def flood(address: str, stop: threading.Event) -> None:
        host, port = address.rsplit(":", 1)
        client = Client(host, int(port))
        producer = Producer(client.connect("fill"), "flood.backlog", encode_message(100, False), count,
                            presettled=False)
        client.wait_for(lambda: producer.opened, time.monotonic() + 30, "attach")
        while producer.acked < count:
            producer.send(count)
            client.turn(0)
        client.close()
        with RawClient(address) as c:
            c.handshake("selector")
            c.begin()
            c.send(performative("attach", ["picky", uint(0), True, ubyte(0), ubyte(0), source(
                "flood.backlog", filter={symbol("jms-selector"): Described(SELECTOR, "color = 'none'")}),
                described(0x29, [])]))
            c.send(performative("flow", flow_fields(0, 100)))
            c.attach_sender(1, "flood.backlog")
            c.expect("flow", lambda f: f.link == "snd-1")
            ready.set()
            i = 0
            while not stop.is_set():  # a trickle of new messages: each one a dispatch pass
                c.send(transfer(1, i, message_bytes(f"more-{i}"), settled=True))
                i += 1
                stop.wait(0.01)
    ready = threading.Event()
    flood.ready = ready
    return flood


# -- measuring --------------------------------------------------------------------------------------


def measure(name: str, flood, seconds: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="hermod-floods-"))
    broker = BrokerProcess(["--port", "0", "--store", "memory", "--log-level", "warning"], work).start()
    pid = broker.proc.pid
    stop = threading.Event()
    failures: list[str] = []
    samples: list[int] = []
    rss_before = rss_kib(pid)

    def attack() -> None:
        try:
            flood(broker.address, stop)
        except Exception as e:  # noqa: BLE001 - reported in the table
            failures.append(repr(e)[:80])

    thread = threading.Thread(target=attack, daemon=True) if flood else None
    latencies: list[float] = []
    errors = 0
    try:
        if thread:
            thread.start()
            ready = getattr(flood, "ready", None)
            if ready is not None:
                ready.wait(600)
        conn = BlockingConnection(broker.url, timeout=30)
        sender = conn.create_sender("bystander")
        receiver = conn.create_receiver("bystander", credit=10)
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            start = time.perf_counter()
            try:
                sender.send(Message(body=f"ping-{i}"), timeout=30)
                receiver.receive(timeout=30)
                receiver.accept()
                latencies.append(time.perf_counter() - start)
            except Exception:  # noqa: BLE001 - counted
                errors += 1
                conn = BlockingConnection(broker.url, timeout=30)
                sender = conn.create_sender("bystander")
                receiver = conn.create_receiver("bystander", credit=10)
            samples.append(rss_kib(pid))
            i += 1
        conn.close()
    finally:
        stop.set()
        alive = broker.proc.poll() is None
        peak = rss_kib(pid, "VmHWM") if alive else 0
        broker.stop()
        if thread:
            thread.join(10)
    lat = sorted(latencies)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return {"flood": name, "rss_before": rss_before / 1024, "rss_max": max(samples, default=0) / 1024,
            "hwm": peak / 1024, "n": len(lat), "p50": pct(0.50), "p99": pct(0.99),
            "max": (lat[-1] * 1000 if lat else float("nan")), "errors": errors, "alive": alive,
            "attack": "; ".join(failures)[:60]}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--backlog", type=int, default=1_000_000)
    p.add_argument("--only", nargs="*")
    args = p.parse_args()
    floods = {
        "none (baseline)": None,
        "credit ignored": credit_ignored,
        "never-reading consumer": never_reads,
        "10k links": many_links,
        "session churn": session_churn,
        "slow-loris (200 sockets)": slow_loris,
        "1MB name/selector, 10k composite": big_requests,
        "decode bombs": decode_bombs,
        "2^32-1 credit, never settles": greedy_consumer,
        f"{args.backlog:,} backlog, non-matching selector": selector_backlog(args.backlog),
    }
    rows = []
    for name, flood in floods.items():
        if args.only and not any(o in name for o in args.only):
            continue
        row = measure(name, flood, args.seconds)
        rows.append(row)
        print(f"{row['flood']}: {row}", flush=True)
    header = (f"{'flood':44} {'RSS before':>10} {'RSS max':>8} {'VmHWM':>7} {'trips':>6} {'p50 ms':>8} "
              f"{'p99 ms':>8} {'max ms':>8} {'errors':>6} alive attack")
    print(header)
    for r in rows:
        print(f"{r['flood']:44} {r['rss_before']:10.1f} {r['rss_max']:8.1f} {r['hwm']:7.1f} {r['n']:6d} "
              f"{r['p50']:8.2f} {r['p99']:8.2f} {r['max']:8.1f} {r['errors']:6d} {r['alive']!s:5} {r['attack']}")
    print("(RSS in MiB; trips = bystander round trips in the window)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
