"""OpenWire codec micro-benchmark: decodes and encodes per second of a typical text message.

    .venv/bin/python benchmarks/openwire_codec.py [body-bytes ...]

An ActiveMQTextMessage as the Classic client sends it (producer and message ids, a queue, two
properties, persistent) with bodies of the given sizes (default 100, 1024, 65536 and 1 MiB),
through the negotiated default format (v12, tight, cache on) and loose, one line per case:
microseconds per decode and per encode. Decode cost should grow with the body only through
one copy (bytes slices), never a per-byte Python loop.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermod.broker.openwire import bodies  # noqa: E402
from hermod.broker.openwire import model as m  # noqa: E402
from hermod.broker.openwire.engine import Marshaller  # noqa: E402

PRODUCER = m.ProducerId("ID:host-40000-1700000000000-1:1", 1, 1)


def message(seq: int, body: bytes) -> m.ActiveMQTextMessage:
    return m.ActiveMQTextMessage(
        producer_id=PRODUCER, destination=m.Queue("orders"), message_id=m.MessageId(None, PRODUCER, seq, 0),
        persistent=True, priority=4, timestamp=1700000000123, content=body,
        properties={"region": "EU", "price": 150})


def run(size: int, tight: bool, seconds: float = 1.0) -> tuple[float, float]:
    body = bodies.encode_text("x" * size)
    writer, reader = Marshaller(12, tight=tight, cache=True), Marshaller(12, tight=tight, cache=True)
    n = max(10, int(20000 * 1024 / (size + 1024)))
    commands = [message(i, body) for i in range(n)]
    start = time.perf_counter()
    frames = [writer.encode(c) for c in commands]
    encode = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for f in frames:
        reader.decode(f)
    decode = (time.perf_counter() - start) / n
    return decode, encode


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1024, 65536, 1 << 20]
    for size in sizes:
        for tight in (True, False):
            decode, encode = run(size, tight)
            print(f"text {size:>8} B {'tight' if tight else 'loose'}: decode {decode * 1e6:9.1f} us"
                  f"  encode {encode * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
