"""Benchmark (not a test): what a password guesser and a big peek cost everybody else (issue 28,
findings 13 and 14).

    PYTHONPATH=$PWD python benchmarks/http_safety.py guess-http  [--seconds 8] [--clients 32]
    PYTHONPATH=$PWD python benchmarks/http_safety.py guess-amqp  [--seconds 8] [--clients 800]
    PYTHONPATH=$PWD python benchmarks/http_safety.py peek        [--messages 8] [--mib 16]

Each starts its own `hermod run` (a user `alice`, anonymous logins on for the bystander), then
runs the attack from one address (127.0.0.1) while a bystander process times AMQP round trips
(send one message to a queue and receive it) and reports the slowest. `guess-*` print wrong
guesses answered per second; `peek` prints how long one HTTP peek took and the slowest round trip
while it ran.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Broker:
    def __init__(self, config: str):
        self.dir = Path(tempfile.mkdtemp(prefix="hermod-safety-"))
        (self.dir / "hermod.toml").write_text(config)
        self.out = open(self.dir / "out.log", "wb")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--http-port", "0", "--store", "memory",
             "--config", str(self.dir / "hermod.toml"), "--log-level", "error"],
            cwd=self.dir, env=env, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = (self.dir / "out.log").read_text(errors="replace")
            amqp = re.search(r"hermod listening on amqp://[^ ]*:(\d+)", text)
            http = re.search(r"hermod http on (http://\S+)", text)
            if amqp and http:
                self.port, self.http = int(amqp.group(1)), http.group(1)
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("broker did not start:\n" + text)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.out.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def config(extra: str = "") -> str:
    sys.path.insert(0, str(ROOT))
    from hermod.broker.security.passwords import hash_password
    return ('[security]\nanonymous = true\nmechanisms = ["PLAIN"]\n'
            f'[[security.user]]\nname = "alice"\npassword_hash = "{hash_password("right")}"\n'
            f'roles = ["admin"]\n{extra}')


def bystander(port: int, stop, result) -> None:
    """AMQP round trips, anonymously, until `stop` is set: the slowest, in seconds."""
    from proton import Message
    from proton.utils import BlockingConnection
    conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=60)
    sender = conn.create_sender("bystander")
    receiver = conn.create_receiver("bystander")
    worst, n = 0.0, 0
    while not stop.is_set():
        t = time.monotonic()
        sender.send(Message(body="ping"))
        receiver.receive(timeout=60)
        receiver.accept()
        worst = max(worst, time.monotonic() - t)
        n += 1
        time.sleep(0.01)
    conn.close()
    result.put((worst, n))


def with_bystander(port: int, attack):
    stop, result = multiprocessing.Event(), multiprocessing.Queue()
    p = multiprocessing.Process(target=bystander, args=(port, stop, result))
    p.start()
    time.sleep(1.0)  # connected and warm
    try:
        out = attack()
    finally:
        stop.set()
    worst, n = result.get(timeout=120)
    p.join()
    return out, worst, n


async def http_guesses(base: str, clients: int, seconds: float) -> int:
    host, port = base.split("//")[1].split(":")
    token = base64.b64encode(b"alice:wrong").decode()
    request = (f"GET /api/queues HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Basic {token}\r\n"
               "\r\n").encode()
    deadline = time.monotonic() + seconds
    answered = 0

    async def one():
        nonlocal answered
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while time.monotonic() < deadline:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                await reader.readexactly(length)
                if time.monotonic() <= deadline:
                    answered += 1
        finally:
            writer.close()
    await asyncio.gather(*(asyncio.wait_for(one(), seconds + 30) for _ in range(clients)),
                         return_exceptions=True)
    return answered


async def amqp_guesses(port: int, clients: int, seconds: float) -> int:
    sys.path.insert(0, str(ROOT))
    from hermod.broker.protocol.amqptypes import Symbol
    from hermod.broker.protocol.sasl import SASL_HEADER, sasl_frame
    init = SASL_HEADER + sasl_frame(0x41, [Symbol("PLAIN"), b"\0alice\0wrong"])
    deadline = time.monotonic() + seconds
    answered = 0

    async def one():
        nonlocal answered
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            try:
                writer.write(init)
                data = b""
                while b"\x00\x53\x44" not in data:  # the sasl-outcome
                    chunk = await asyncio.wait_for(reader.read(4096), max(0.01, deadline - time.monotonic()))
                    if not chunk:
                        break
                    data += chunk
                if b"\x00\x53\x44" in data and time.monotonic() <= deadline:
                    answered += 1
            except (OSError, asyncio.TimeoutError):
                pass
            finally:
                writer.close()
    await asyncio.gather(*(one() for _ in range(clients)), return_exceptions=True)
    return answered


def peek_once(broker: Broker, count: int, mib: int) -> tuple[float, int]:
    from proton import Message
    from proton.utils import BlockingConnection
    conn = BlockingConnection(f"amqp://127.0.0.1:{broker.port}", timeout=120)
    sender = conn.create_sender("big")
    body = "x" * (mib * 1024 * 1024)
    for _ in range(count):
        sender.send(Message(body=body))
    conn.close()

    def attack():
        t = time.monotonic()
        with urllib.request.urlopen(broker.http + f"/api/queues/big/messages?limit={count}", timeout=300) as r:
            size = len(r.read())
        return time.monotonic() - t, size
    return attack


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["guess-http", "guess-amqp", "peek"])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--clients", type=int)
    p.add_argument("--messages", type=int, default=8)
    p.add_argument("--mib", type=int, default=16)
    args = p.parse_args()
    broker = Broker(config() if args.what != "peek" else "[server]\nmax_message_size = 104857600\n")
    try:
        if args.what == "guess-http":
            clients = args.clients or 32
            n, worst, trips = with_bystander(broker.port, lambda: asyncio.run(
                http_guesses(broker.http, clients, args.seconds)))
            print(f"HTTP: {clients} clients, {n / args.seconds:.1f} wrong guesses/s; "
                  f"bystander worst round trip {worst * 1000:.0f} ms over {trips}")
        elif args.what == "guess-amqp":
            clients = args.clients or 800
            n, worst, trips = with_bystander(broker.port, lambda: asyncio.run(
                amqp_guesses(broker.port, clients, args.seconds)))
            print(f"AMQP: {clients} parallel connections, {n / args.seconds:.1f} wrong guesses/s; "
                  f"bystander worst round trip {worst * 1000:.0f} ms over {trips}")
        else:
            (took, size), worst, trips = with_bystander(broker.port, peek_once(broker, args.messages, args.mib))
            print(f"peek of {args.messages} x {args.mib} MiB: {took:.2f} s, {size / 2**20:.1f} MiB answer; "
                  f"bystander worst round trip {worst * 1000:.0f} ms over {trips}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
