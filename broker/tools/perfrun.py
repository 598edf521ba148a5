"""Running one `hermod perf` measurement over the raw-engine client (perfclient.py): the
throughput and latency loops, and CPU accounting of the broker under test."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from cproton_ffi import lib

from .perfclient import STAMP_SIZE, Client, Consumer, PerfError, Producer, encode_message


@dataclass
class Flow:
    """What one run moves: one producer per target, one consumer per (source, selector), `count`
    messages in all (split over the producers), each of which makes `fanout` deliveries (1 for a
    queue however many consumers share it; N for N subscribers of a topic; K + 1 for K diverts).
    No sources: fill (done when every send is settled); no targets: drain `count` already there."""
    targets: list
    sources: list
    count: int
    fanout: int = 1
    links_per_connection: int = 1  # >1: several links share a connection (many queues)


@dataclass
class Result:
    mode: str
    sent: int = 0
    received: int = 0
    acked: int = 0
    rejected: int = 0
    secs: float = 0.0
    error: str = ""
    cpu_s: float | None = None
    client_cpu_s: float = 0.0
    latencies_ns: list = field(default_factory=list)
    out_of_order: int = 0
    unstamped: int = 0
    send_secs: float = 0.0
    expected: int = 0
    rss_bytes: int | None = None
    per_consumer: list = field(default_factory=list)


def run(url_host: str, url_port: int, address: str, *, count: int, **kw) -> Result:
    """One producer -> one consumer on `address` (`hermod perf --mode`)."""
    return run_flow(url_host, url_port, Flow([address], [(address, None)], count), **kw)


def run_flow(url_host: str, url_port: int, flow: Flow, *, mode: str, size: int,
             durable: bool = False, credit: int = 1000, rate: float = 0.0, warmup: int = 0,
             presettled: bool = False, timeout: float = 120.0, cpu=None, rss=None,
             hostname: str | None = None, tls: bool = False, properties: dict | None = None,
             progress=None) -> Result:
    """Run one test. `cpu` / `rss` are callables giving the broker's CPU seconds so far / its
    resident bytes now, or None; `progress(received, expected, sent, elapsed_s)` is called after
    every loop turn (it throttles itself)."""
    result = Result(mode)
    client = Client(url_host, url_port, hostname, tls=tls)
    deadline = time.monotonic() + timeout
    producers: list[Producer] = []
    consumers: list[Consumer] = []
    try:
        # Consumers attach first: with brokers that create a queue on a consumer's attach (and
        # topics, where a message sent before the subscription exists is dropped), the
        # producers' first messages must find them.
        endpoints = _Connections(client, flow.links_per_connection)
        for i, (source, selector) in enumerate(flow.sources):
            consumers.append(Consumer(endpoints.next("consumer"), source, credit,
                                      record_latency=(mode == "latency"), selector=selector,
                                      name=f"hermod-perf-receiver-{i}"))
        client.wait_for(lambda: all(c.opened for c in consumers), deadline, "the consumers' attach")
        message = encode_message(size, durable, properties)
        endpoints = _Connections(client, flow.links_per_connection)
        n = len(flow.targets)
        for i, target in enumerate(flow.targets):
            share = flow.count // n + (1 if i < flow.count % n else 0)
            producers.append(Producer(endpoints.next("producer"), target, message, share + warmup, presettled,
                                      stamp=size >= STAMP_SIZE, name=f"hermod-perf-sender-{i}"))
        client.wait_for(lambda: all(p.opened and lib.pn_link_credit(p.link) > 0 for p in producers), deadline,
                        "the producers' attach and credit")
        result.expected = expected = (flow.count + warmup * n) * flow.fanout if flow.sources else 0
        cpu0 = cpu() if cpu else None
        own0 = _own_cpu()
        start = time.perf_counter()

        def received() -> int:
            return sum(c.received for c in consumers)

        def turn(wait: float) -> None:
            if client.errors():
                raise PerfError(client.errors())
            if time.monotonic() > deadline:
                raise PerfError(f"timed out ({received()} of {expected} deliveries)")
            client.turn(wait)
            if progress:
                progress(received(), expected, sum(p.sent for p in producers), time.perf_counter() - start)

        def unfinished() -> bool:
            if flow.sources:
                return received() < expected
            # Nobody receives (filling a backlog): done when every send has its outcome.
            return any(p.acked + p.rejected < p.count for p in producers)

        if mode == "latency":
            _paced(turn, received, producers, flow.fanout, expected, rate)
        else:
            while unfinished():
                can_send = False
                for p in producers:
                    if p.sent < p.count:
                        p.send(p.count)
                        can_send = can_send or (p.sent < p.count and lib.pn_link_credit(p.link) > 0)
                if not result.send_secs and all(p.sent == p.count for p in producers):
                    result.send_secs = time.perf_counter() - start
                turn(0 if can_send else 0.5)
        end = time.perf_counter()
        result.client_cpu_s = _own_cpu() - own0
        if cpu:
            result.cpu_s = cpu() - cpu0
        result.secs = end - start
        if rss:
            result.rss_bytes = rss()
        # Let the last dispositions for the producers arrive (not timed).
        acked_deadline = time.monotonic() + 2.0
        while (not presettled and time.monotonic() < acked_deadline
               and any(p.acked + p.rejected < p.sent for p in producers)):
            client.turn(0.05)
    except PerfError as e:
        result.error = str(e)
    finally:
        try:
            result.sent = sum(p.sent for p in producers)
            result.acked = sum(p.acked for p in producers)
            result.rejected = sum(p.rejected for p in producers)
            result.per_consumer = [c.received for c in consumers]
            result.received = sum(result.per_consumer)
            result.out_of_order = sum(c.out_of_order for c in consumers) if len(producers) == 1 else 0
            result.unstamped = sum(c.unstamped for c in consumers)
            result.latencies_ns = [lat for c in consumers for seq, lat in c.latencies_ns if seq >= warmup]
        finally:
            client.close()
    return result


class _Connections:
    """Hands out endpoints for links, `per` links to a connection."""

    def __init__(self, client: Client, per: int):
        self.client, self.per = client, max(1, per)
        self.ep, self.used, self.n = None, 0, 0

    def next(self, role: str):
        if self.ep is None or self.used >= self.per:
            self.ep = self.client.connect(f"{role}{self.n}")
            self.used, self.n = 0, self.n + 1
        self.used += 1
        return self.ep


def _paced(turn, received, producers: list[Producer], fanout: int, expected: int, rate: float) -> None:
    """Send at `rate` msg/s in all (the producers take turns, one slot each; late slots are caught
    up at once) and wait for every delivery."""
    n = len(producers)
    interval = n / rate  # each producer's own period
    t0 = time.perf_counter()
    offsets = [i / rate for i in range(n)]
    while received() < expected:
        now = time.perf_counter()
        next_due = None
        for p, off in zip(producers, offsets):
            if p.sent < p.count:
                due = min(p.count, int((now - t0 - off) / interval) + 1) if now >= t0 + off else 0
                if due > p.sent:
                    p.send(due - p.sent)
                if p.sent < p.count:
                    at = t0 + off + p.sent * interval
                    next_due = at if next_due is None else min(next_due, at)
        idle = received() >= sum(p.sent for p in producers) * fanout  # nothing in flight
        wait = 0.1 if next_due is None else max(0.0, min(next_due - time.perf_counter(), 0.1))
        if 0 < wait < 0.1 and idle:
            # Nothing in flight: epoll counts whole milliseconds (Python rounds up), which would
            # make the sends late and bursty; wait the whole milliseconds in the loop, then sleep
            # the rest precisely.
            turn(int(wait * 1000) / 1000.0)
            rest = next_due - time.perf_counter()
            if rest > 0 and received() >= sum(p.sent for p in producers) * fanout:
                time.sleep(rest)
        else:
            turn(wait)


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


# -- broker CPU from /proc -----------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


def process_tree(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def cpu_seconds(pids) -> float:
    """User + system CPU seconds of the given processes (all their threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def rss_bytes(pids) -> int:
    """Resident set of the given processes, summed (VmRSS from /proc/PID/status)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def rss_probe(pids: list[int]):
    """A callable giving the resident bytes of `pids` and their descendants now."""
    return lambda: rss_bytes([p for pid in pids for p in process_tree(pid)])


def cpu_probe(pids: list[int], include_children: bool = True):
    """A callable giving the CPU seconds used so far by `pids` and (re-scanned each call) their
    descendants: RabbitMQ's pid is a shell script whose child is the Erlang VM."""
    def probe() -> float:
        found: list[int] = []
        for pid in pids:
            found.extend(process_tree(pid) if include_children else [pid])
        return cpu_seconds(found)
    return probe
