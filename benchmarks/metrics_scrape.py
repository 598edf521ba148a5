"""Benchmark (not a test): loop time of one /metrics scrape with 10,000 queues.

Builds the broker in-process with the in-memory store, creates N queues with a few messages
each, and times the snapshot (what the HTTP handler runs on the loop) and the text (which it
hands to a worker thread) apart, plus one full scrape over HTTP for the end-to-end figure.

    PYTHONPATH=$PWD python benchmarks/metrics_scrape.py [--queues 10000]
"""
from __future__ import annotations

import argparse
import os
import asyncio
import statistics
import time
import urllib.request

from hermod.broker.app import Broker
from hermod.broker.config import Config
from hermod.broker.http.api import Api
from hermod.broker.http.server import HttpServer
from hermod.broker.management import metrics


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--queues", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    broker = Broker(Config())
    broker.start()
    mc = broker.management.codec
    po = broker.postoffice
    for i in range(args.queues):
        name = f"bench.queue.{i}"
        po.create_queue(name, name)
        for _ in range(i % 3):
            m = mc.new_message(name, "x", {}, False, "anycast", 0)
            po.post(po.route(m, name, "anycast"))
    loop_ms, thread_ms = [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        snapshot = broker.management.metrics_snapshot()  # what the HTTP handler runs on the loop
        loop_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        text = metrics.text(snapshot)  # what it hands to a worker thread
        thread_ms.append((time.perf_counter() - t) * 1000)
    print(f"{args.queues} queues: {len(text) / 1e6:.1f} MB, {text.count(chr(10))} lines; loop time (snapshot) "
          f"median {statistics.median(loop_ms):.1f} ms, max {max(loop_ms):.1f} ms; text off the loop median "
          f"{statistics.median(thread_ms):.1f} ms; load {os.getloadavg()[0]:.1f}")

    async def over_http() -> float:
        server = HttpServer(Api(broker))
        host, port = await server.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        t = time.perf_counter()
        body = await loop.run_in_executor(None, lambda: urllib.request.urlopen(
            f"http://{host}:{port}/metrics", timeout=30).read())
        elapsed = (time.perf_counter() - t) * 1000
        await server.stop()
        assert body
        return elapsed
    print(f"one scrape over HTTP: {asyncio.run(over_http()):.1f} ms end to end")


if __name__ == "__main__":
    main()
