"""Running one `hermod perf` measurement over the raw-engine client (perfclient.py): the
throughput and latency loops, and CPU accounting of the broker under test."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from cproton_ffi import lib

from .perfclient import STAMP_SIZE, Client, Consumer, PerfError, Producer, encode_message


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


def run(url_host: str, url_port: int, address: str, *, mode: str, count: int, size: int,
        durable: bool = False, credit: int = 1000, rate: float = 0.0, warmup: int = 0,
        presettled: bool = False, timeout: float = 120.0, cpu=None, hostname: str | None = None,
        tls: bool = False) -> Result:
    """Run one test; `cpu` is a callable returning the broker's CPU seconds so far, or None."""
    result = Result(mode)
    client = Client(url_host, url_port, hostname, tls=tls)
    deadline = time.monotonic() + timeout
    producer: Producer | None = None
    consumer: Consumer | None = None
    try:
        # The consumer attaches first: with brokers that create a queue on a consumer's attach,
        # the producer's first message must find it.
        cons_ep = client.connect("consumer")
        consumer = Consumer(cons_ep, address, credit, record_latency=(mode == "latency"))
        client.wait_for(lambda: consumer.opened, deadline, "the consumer's attach")
        prod_ep = client.connect("producer")
        total = count + warmup
        producer = Producer(prod_ep, address, encode_message(size, durable), total, presettled,
                            stamp=size >= STAMP_SIZE)
        client.wait_for(lambda: producer.opened and lib.pn_link_credit(producer.link) > 0, deadline,
                        "the producer's attach and credit")
        cpu0 = cpu() if cpu else None
        own0 = _own_cpu()
        start = time.perf_counter()
        if mode == "latency":
            _paced(client, producer, consumer, total, rate, deadline)
        else:
            while consumer.received < total:
                if producer.sent < total:
                    producer.send(total)
                    if producer.sent == total and not result.send_secs:
                        result.send_secs = time.perf_counter() - start
                if client.errors():
                    raise PerfError(client.errors())
                if time.monotonic() > deadline:
                    raise PerfError("timed out")
                client.turn(0 if producer.sent < total and lib.pn_link_credit(producer.link) > 0 else 0.5)
        end = time.perf_counter()
        result.client_cpu_s = _own_cpu() - own0
        if cpu:
            result.cpu_s = cpu() - cpu0
        result.secs = end - start
        # Let the last dispositions for the producer arrive (not timed).
        acked_deadline = time.monotonic() + 2.0
        while (producer.acked + producer.rejected < producer.sent and not presettled
               and time.monotonic() < acked_deadline):
            client.turn(0.05)
    except PerfError as e:
        result.error = str(e)
    finally:
        try:
            if producer is not None:
                result.sent, result.acked, result.rejected = producer.sent, producer.acked, producer.rejected
            if consumer is not None:
                result.received = consumer.received
                result.out_of_order = consumer.out_of_order
                result.unstamped = consumer.unstamped
                result.latencies_ns = [lat for seq, lat in consumer.latencies_ns if seq >= warmup]
        finally:
            client.close()
    return result


def _paced(client: Client, producer: Producer, consumer: Consumer, total: int, rate: float,
           deadline: float) -> None:
    """Send at `rate` msg/s (one message per slot, late slots caught up at once) and wait for all."""
    interval = 1.0 / rate
    t0 = time.perf_counter()
    while consumer.received < total:
        now = time.perf_counter()
        if producer.sent < total:
            due = min(total, int((now - t0) / interval) + 1)
            if due > producer.sent:
                producer.send(due - producer.sent)
            wait = t0 + producer.sent * interval - time.perf_counter()
            wait = max(0.0, min(wait, 0.1))
        else:
            wait = 0.1
        if client.errors():
            raise PerfError(client.errors())
        if time.monotonic() > deadline:
            raise PerfError("timed out")
        if 0 < wait < 0.1 and consumer.received >= producer.sent:
            # Nothing in flight: epoll counts whole milliseconds (Python rounds up), which would
            # make the sends late and bursty; wait the whole milliseconds in the loop, then sleep
            # the rest precisely.
            client.turn(int(wait * 1000) / 1000.0)
            rest = t0 + producer.sent * interval - time.perf_counter()
            if rest > 0 and consumer.received >= producer.sent:
                time.sleep(rest)
        else:
            client.turn(wait)


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


def cpu_probe(pids: list[int], include_children: bool = True):
    """A callable giving the CPU seconds used so far by `pids` and (re-scanned each call) their
    descendants: RabbitMQ's pid is a shell script whose child is the Erlang VM."""
    def probe() -> float:
        found: list[int] = []
        for pid in pids:
            found.extend(process_tree(pid) if include_children else [pid])
        return cpu_seconds(found)
    return probe
