"""Memory under a flood (issue 6, item 7): a producer sends GIGABYTES of 1 KiB messages to a
queue nobody consumes, under `max_size_bytes` with the page policy on a SQLite store (or, with
`--store memory`, the in-memory store, so that the queue pages into the spool's files); the
broker's resident memory is sampled throughout (peak = VmHWM), then a consumer takes every
message back and the count and order are checked.

    .venv/bin/python benchmarks/paging_memory.py [--gigabytes 1.0] [--limit-mb 50] [--store memory]

Prints one line per phase and a final summary line. Not part of `make test` (minutes).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hermod.broker.tools.perfclient import Client, Consumer, Producer, encode_message  # noqa: E402


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--gigabytes", type=float, default=1.0)
    p.add_argument("--limit-mb", type=int, default=50)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    args = p.parse_args()
    count = int(args.gigabytes * 1024 ** 3 / args.size)
    work = Path(tempfile.mkdtemp(prefix="hermod-paging-bench-"))
    cfg = work / "hermod.toml"
    store = ('url = "memory"' if args.store == "memory" else
             f'url = "sqlite:///{work / "hermod.db"}"\nsqlite_synchronous = "NORMAL"')
    cfg.write_text(f"""
[store]
{store}

[[address_settings]]
match = "flood"
max_size_bytes = {args.limit_mb * 1024 * 1024}
address_full_policy = "page"
""")
    broker = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--config", str(cfg),
                               "--log-level", "warning"], stdout=subprocess.PIPE, text=True, cwd=work)
    line = broker.stdout.readline()
    port = int(re.search(r":(\d+)\s*$", line).group(1))
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(rss_kib(broker.pid))
            stop.wait(0.5)

    threading.Thread(target=sample, daemon=True).start()
    try:
        client = Client("127.0.0.1", port)
        producer = Producer(client.connect("producer"), "flood", encode_message(args.size, False), count,
                            presettled=False)
        deadline = time.monotonic() + 3600
        start = time.perf_counter()
        client.wait_for(lambda: producer.opened, deadline, "attach")
        while producer.acked + producer.rejected < count:
            if producer.sent < count:
                producer.send(count)
            client.turn(0 if producer.sent < count and producer.link and True else 0.2)
            if client.errors():
                raise SystemExit(client.errors())
        sent_secs = time.perf_counter() - start
        print(f"sent messages={count} bytes={count * args.size} secs={sent_secs:.1f} "
              f"msg_per_s={count / sent_secs:.0f} rejected={producer.rejected} "
              f"rss_now_mib={rss_kib(broker.pid) / 1024:.1f} peak_mib={rss_kib(broker.pid, 'VmHWM') / 1024:.1f}")
        consumer = Consumer(client.connect("consumer"), "flood", 1000, record_latency=False)
        start = time.perf_counter()
        client.wait_for(lambda: consumer.received >= count, deadline, "every message back")
        got_secs = time.perf_counter() - start
        print(f"received messages={consumer.received} out_of_order={consumer.out_of_order} secs={got_secs:.1f} "
              f"msg_per_s={consumer.received / got_secs:.0f}")
        client.close()
    finally:
        stop.set()
        peak = rss_kib(broker.pid, "VmHWM") / 1024
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    print(f"summary store={args.store} gigabytes={args.gigabytes} limit_mb={args.limit_mb} peak_rss_mib={peak:.1f} "
          f"max_sampled_rss_mib={max(samples) / 1024 if samples else 0:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
