"""`hermod perf`: a load generator (placeholder until the raw-engine generator lands)."""
from __future__ import annotations

import time


def add_arguments(p) -> None:
    p.add_argument("--url", default="amqp://127.0.0.1:5672")
    p.add_argument("--address", default="perf")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--size", type=int, default=1024)


def main(args) -> int:
    from .clients import consume, produce
    start = time.perf_counter()
    produce(args.url, args.address, args.count, args.size)
    consume(args.url, args.address, args.count, quiet=True)
    elapsed = time.perf_counter() - start
    print(f"perf: {args.count} messages in {elapsed:.2f} s ({args.count / elapsed:.0f} msg/s)")
    return 0
