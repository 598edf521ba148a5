"""STOMP codec micro-benchmark: microseconds per SEND frame parsed and per MESSAGE frame encoded.

    .venv/bin/python benchmarks/stomp_codec.py [body-bytes ...]

A SEND as stomp.py writes it (destination, content-type, receipt, content-length, two
application headers) with bodies of the given sizes (default 100, 1024, 65536 and 1 MiB), fed
to one parser 1000 frames per call, and the same frame fed whole, one per call; and a MESSAGE
encoded. Parse cost grows with the body only through the bytes copies (`find` and slices), never
a per-byte Python loop, so 1 MiB should cost little more per byte than 1 KiB. Times are CPU
time of this process (`time.process_time`), so that other load on the machine inflates them less.
"""
from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermod.broker.stomp import FrameParser, Limits, encode_frame  # noqa: E402

HEADERS = [("destination", "/queue/orders"), ("content-type", "text/plain"), ("receipt", "r-1"),
           ("region", "EU"), ("price", "150")]


def send_frame(size: int) -> bytes:
    return encode_frame("SEND", HEADERS, b"x" * size, "1.2")


def run(size: int) -> tuple[float, float, float]:
    frame = send_frame(size)
    batch = max(1, min(1000, (1 << 22) // len(frame)))
    stream = frame * batch
    parser = FrameParser(Limits(), "1.2")
    repeat = max(3, int(2e7 // (len(stream) + 1)))
    batched = min(timeit.repeat(lambda: parser.feed(stream), timer=time.process_time, number=1,
                                repeat=min(repeat, 50))) / batch
    single = min(timeit.repeat(lambda: parser.feed(frame), timer=time.process_time, number=200, repeat=5)) / 200
    body = b"x" * size
    message = [("subscription", "s1"), ("message-id", "ID:1"), ("destination", "/queue/orders"),
               ("content-type", "text/plain"), ("region", "EU")]
    encode = min(timeit.repeat(lambda: encode_frame("MESSAGE", message, body, "1.2"), timer=time.process_time,
                                number=200, repeat=5)) / 200
    return batched, single, encode


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1024, 65536, 1 << 20]
    print(f"{'body':>9} {'parse µs (1000/feed)':>21} {'parse µs (1/feed)':>18} {'encode µs':>10}")
    for size in sizes:
        batched, single, encode = run(size)
        print(f"{size:>9} {batched * 1e6:>21.2f} {single * 1e6:>18.2f} {encode * 1e6:>10.2f}")


if __name__ == "__main__":
    main()
