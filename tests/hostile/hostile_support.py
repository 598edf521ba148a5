"""Support for the hostile-client suite: the `Guard` that stands for every well-behaved client.

The guard does two things each case must prove:
- `guard.round_trip()`: a polite client (BlockingConnection) sends one message and receives it
  back, within ROUND_TRIP_BOUND seconds; it is called before, during and after an attack.
- messages accepted before the attack (`guard.preload`, done at setup) and any the test adds
  with `guard.expect(...)` must all come back: `guard.verify()` drains and compares. A test
  that never calls verify fails at teardown.
"""
from __future__ import annotations

import itertools
import time
from pathlib import Path

from durable_clients import body_of, receive_exactly
from proton import Message
from wire_helpers import connect

ROUND_TRIP_BOUND = 10.0  # seconds: generous, a stalled loop takes far longer
PRELOAD = 50
KEEP_QUEUE = "hostile.keep"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Guard:
    """The bystander and the ledger of accepted messages (see the module docstring)."""

    def __init__(self, broker):
        self.broker = broker
        self.url = broker.url
        self.expected: dict[str, list] = {KEEP_QUEUE: []}
        self.latencies: list[float] = []
        self._seq = itertools.count()
        self.verified = False
        self.conn = None  # the bystander's own connection, opened by the first round_trip

    def _connect(self) -> None:
        self.conn = connect(self.url, container_id="bystander")
        self.sender = self.conn.create_sender("hostile.bystander")
        self.receiver = self.conn.create_receiver("hostile.bystander", credit=10)

    def preload(self, count: int = PRELOAD) -> None:
        self.expect(KEEP_QUEUE, [f"keep-{i}" for i in range(count)])

    def expect(self, address: str, bodies: list, send: bool = True, **message_fields) -> None:
        """Send `bodies` to `address` (each waits for `accepted`) and remember them."""
        if send:
            conn = connect(self.url)
            try:
                sender = conn.create_sender(address)
                for body in bodies:
                    sender.send(Message(body=body, durable=True, **message_fields))
            finally:
                conn.close()
        self.expected.setdefault(address, []).extend(bodies)

    def round_trip(self, what: str = "") -> float:
        """One send + receive on the bystander's own connection; returns seconds taken."""
        body = f"ping-{next(self._seq)}"
        start = time.monotonic()
        if self.conn is None:
            self._connect()
        self.sender.send(Message(body=body), timeout=ROUND_TRIP_BOUND)
        got = self.receiver.receive(timeout=ROUND_TRIP_BOUND)
        self.receiver.accept()
        took = time.monotonic() - start
        assert got.body == body, f"bystander got {got.body!r}, sent {body!r} {what}"
        assert took < ROUND_TRIP_BOUND, f"bystander round trip took {took:.1f}s {what}"
        self.latencies.append(took)
        return took

    def fresh_round_trip(self, what: str = "") -> None:
        """A round trip on a new connection (a broker that refuses newcomers fails here)."""
        conn = connect(self.url)
        try:
            address = f"hostile.fresh.{next(self._seq)}"
            conn.create_sender(address).send(Message(body="fresh"), timeout=ROUND_TRIP_BOUND)
            got = conn.create_receiver(address).receive(timeout=ROUND_TRIP_BOUND)
            assert got.body == "fresh", what
        finally:
            conn.close()

    def verify(self) -> None:
        """After the attack: the broker is alive, serves old and new clients, and every message
        accepted to the guard's ledger comes back, in order, exactly once."""
        assert self.broker.proc.poll() is None, (
            "the broker died:\n" + "".join(self.broker.stderr_lines[-20:]))
        self.round_trip("after the attack")
        self.fresh_round_trip("after the attack")
        for address, bodies in self.expected.items():
            got = drain(self.url, address, len(bodies))
            assert got == bodies, f"{address}: accepted {len(bodies)}, got back {len(got)}: " \
                                  f"missing {[b for b in bodies if b not in got][:10]}"
        self.verified = True

    def close(self) -> None:
        if self.conn is not None and self.broker.proc.poll() is None:  # verify() reports a death
            self.conn.close()


def drain(url: str, address: str, count: int) -> list:
    """The bodies of exactly `count` messages taken from `address` (none more there)."""
    return [body_of(m) for m in receive_exactly(url, address, count)]
