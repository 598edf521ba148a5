"""The echo floor: what a send -> receive round trip costs on this machine at this moment with
no broker at all (a Python echo process on loopback TCP). Latency figures are reported beside it:
on a loaded machine every broker's p99 is mostly the machine's."""
from __future__ import annotations

import socket
import subprocess
import sys
import time


def percentile(sorted_values: list, q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


ECHO_SERVER = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    d = c.recv(65536)
    if not d:
        break
    c.sendall(d)
"""


def echo_floor(rate: float, count: int, size: int) -> dict:
    """The machine's own latency floor: a Python echo process on loopback TCP, `size`-byte
    messages at `rate`, round trip timed like a broker's send -> receive (two hops, one wake-up
    of another process each way). A broker cannot beat this on the same box at the same moment."""
    proc = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = b"x" * size
        lat = []
        t0 = time.perf_counter()
        for i in range(count):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            start = time.perf_counter_ns()
            sock.sendall(payload)
            got = 0
            while got < size:
                got += len(sock.recv(size - got))
            lat.append((time.perf_counter_ns() - start) / 1e6)
        sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
    lat.sort()
    return {"mode": "latency", "msgs": len(lat), "p50_ms": round(percentile(lat, 50), 3),
            "p99_ms": round(percentile(lat, 99), 3), "max_ms": round(lat[-1], 3)}
