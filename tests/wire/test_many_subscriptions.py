"""Attaching many subscriptions costs the broker the same per attach at 20,000 as at the start
(issue 18 item 5). A mix of exact and wildcard subscriptions used to cost each attach a pass over
everything already there: 1.75 ms an attach at 4,000, hours for 100,000.

Measured as broker CPU seconds (utime + stime from /proc/PID/stat, so other processes on a loaded
machine do not count) per batch of 5,000 attaches: with a constant cost per attach the last batch
costs about what the first did; with a cost proportional to what is there it costs ~7 times as
much. The wall-clock deadline only stops a broken broker from holding up the suite.
"""
from __future__ import annotations

import os
import time

import pytest
from proton.handlers import MessagingHandler
from proton.reactor import Container

from wire_helpers import topic

BATCH = 5_000
BATCHES = 4
LINKS_PER_CONNECTION = 250  # under max_links_per_connection (1,024)
DEADLINE_S = 120  # the whole run: ~12 s on a loaded 2-core machine with a linear broker

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Subscriber(MessagingHandler):
    """Opens subscriptions in batches (half exact names, half `#` patterns that match none of
    them, as on one topic tree) and records the broker's CPU time after each batch is attached."""

    def __init__(self, url: str, pid: int):
        super().__init__(prefetch=0)
        self.url, self.pid = url, pid
        self.opened = 0
        self.target = 0
        self.cpu = []
        self.connections = []
        self.deadline = time.monotonic() + DEADLINE_S
        self.error = None

    def on_start(self, event):
        self.container = event.container
        self.cpu.append(cpu_seconds(self.pid))
        self.container.schedule(5.0, self)
        self._batch()

    def _batch(self):
        first = self.target
        self.target += BATCH
        for i in range(first, self.target):
            if i % LINKS_PER_CONNECTION == 0:
                self.connections.append(self.container.connect(self.url, reconnect=False))
            address = f"tree.other.{i}" if i % 2 == 0 else f"tree.w{i}.#"
            self.container.create_receiver(self.connections[-1], address, name=f"sub-{i}", options=topic())

    def on_link_opened(self, event):
        if event.receiver is None:
            return
        if event.link.remote_source.address is None:  # refused: the broker detaches it
            self.error = f"subscription {event.link.name} refused"
        self.opened += 1
        if self.opened == self.target:
            self.cpu.append(cpu_seconds(self.pid))
            if len(self.cpu) <= BATCHES:
                self._batch()
            else:
                self._close()

    def on_link_error(self, event):
        self.error = f"{event.link.name}: {event.link.remote_condition}"
        self._close()

    def on_timer_task(self, event):
        if time.monotonic() > self.deadline:
            self.error = f"only {self.opened} of {self.target} subscriptions attached in {DEADLINE_S} s"
            self._close()
            self.container.stop()  # a broker this far behind would take as long to answer the closes
        elif self.connections and not all(c.state & c.LOCAL_CLOSED for c in self.connections):
            self.container.schedule(5.0, self)

    def _close(self):
        for c in self.connections:
            c.close()


def test_the_last_of_20000_mixed_subscriptions_costs_the_broker_what_the_first_did(broker):
    subscriber = Subscriber(broker.url, broker.proc.pid)
    Container(subscriber).run()
    assert subscriber.error is None, subscriber.error
    assert subscriber.opened == BATCH * BATCHES
    per_batch = [b - a for a, b in zip(subscriber.cpu, subscriber.cpu[1:])]
    first, last = per_batch[0], per_batch[-1]
    # Linear: about equal (dicts grow, caches warm). Proportional to what is there: ~7x.
    assert last <= 2.5 * first + 0.5, per_batch
