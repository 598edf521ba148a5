"""Durable sends are paced by the store (issue 18 goal 3): a producer gets credit back as its
units commit, not as its transfers arrive, so however fast it sends, the broker holds a bounded
number of uncommitted durable units: at most the link's window (1,000) per link, whether the
transfers are settled or not, and at most the journal budget (10,000) across all links. The
store is held still by an exclusive SQLite lock; the figure is `hermod_journal_depth` from
/metrics. The clients are hand-framed (amqp_frames) and send exactly as much as their credit
allows, as fast as they can."""
from __future__ import annotations

import re
import sqlite3
import struct
import urllib.request

from proton import Described, uint, ulong

from amqp_frames import (BEGIN, DETACH, DISPOSITION, FLOW, TRANSFER, FrameClient, encode, frame,
                         link_credit_limit, message, settled_count)
from hermod_testing import wait_for

WINDOW = 1000  # ProducerLink.PRODUCER_CREDIT
BUDGET = 10_000  # FlowControl.JOURNAL_BUDGET_UNITS
ACCEPTED = Described(ulong(0x24), [])


def journal_depth(broker) -> int:
    base = next(m.group(1) for line in broker.stdout_lines
                if (m := re.search(r"hermod http on (https?://\S+)", line)))
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return int(re.search(r"^hermod_journal_depth (\d+)$", text, re.M).group(1))


def durable_transfers(first: int, last: int, settled: bool) -> bytes:
    """Transfers first..last-1 on handle 0 of channel 0, durable (header durable=true)."""
    return b"".join(
        frame(0, encode(TRANSFER, [uint(0), uint(i), struct.pack(">I", i), uint(0), settled, False])
              + encode(0x70, [True]) + message(b"d%d" % i))
        for i in range(first, last))


class Producer:
    """One connection, one sending link; it sends whatever its credit allows, at once."""

    def __init__(self, broker, address: str, settled: bool = False):
        self.client = FrameClient(broker.address)
        self.client.handshake()
        self.client.begin(0)
        self.settled = settled
        self.sent = 0
        self.sessions = 1
        reply = self.client.attach_sender(0, 0, address)
        assert reply.fields[6] is not None, "attach refused"
        self.sync()

    def granted(self) -> int:
        """The most transfers the broker has allowed on the link so far."""
        limits = [link_credit_limit(f) for _, f in self.client.received if f.code == FLOW and f.channel == 0]
        return max([0, *[n for n in limits if n is not None]])

    def sync(self) -> None:
        """Every frame sent before has been handled once a new session is answered."""
        self.client.send(self.sessions, BEGIN, [None, uint(0), uint(2 ** 31 - 1), uint(2 ** 31 - 1)])
        self.sessions += 1
        while self.client.read().code != BEGIN:
            pass

    def send_what_credit_allows(self, cap: int) -> None:
        """Send up to the credit, then again for any credit that came back, until none does
        (or `cap` transfers are out)."""
        while (limit := min(self.granted(), cap)) > self.sent:
            self.client.sock.sendall(durable_transfers(self.sent, limit, self.settled))
            self.sent = limit
            self.sync()
            self.sync()  # a flow written while the first answer was on its way is in by now

    def read_outcomes(self, expected: int) -> int:
        """Read until `expected` transfers are settled (counting those read before); each accepted."""
        def settled() -> int:
            out = 0
            for _, f in self.client.received:
                assert f.code != DETACH, f.fields
                if f.code == DISPOSITION and f.channel == 0:
                    assert f.fields[4] == ACCEPTED, f.fields
                    out += settled_count(f)
            return out
        while settled() < expected:
            self.client.read()
        return settled()


def hold_store(db) -> sqlite3.Connection:
    lock = sqlite3.connect(db, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")  # the store cannot commit until the test lets it
    return lock


def queue_depth(broker, address: str) -> int:
    from hermod.broker.tools.clients import management_call
    return next(r["messages"] for r in management_call(broker.url, "queue.stat") if r["queue"] == address)


def test_unsettled_durable_sends_never_outrun_the_store_by_more_than_the_window(start_broker, tmp_path):
    db = tmp_path / "window.db"
    b = start_broker(store=f"sqlite:///{db}")
    p = Producer(b, "credit.window")
    lock = hold_store(db)
    try:
        p.send_what_credit_allows(cap=5 * WINDOW)
        wait_for(lambda: journal_depth(b) == WINDOW, message="the window's units in the journal")
        p.sync()
        assert p.sent == WINDOW and p.granted() == WINDOW and journal_depth(b) == WINDOW
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert p.read_outcomes(WINDOW) == WINDOW
    while p.granted() <= WINDOW:  # and the credit comes back
        p.client.read()
    p.client.close()


def test_presettled_durable_sends_hold_their_credit_until_their_units_commit(start_broker, tmp_path):
    # Settled at the sender, so no outcome is owed; the credit is still the store's pace.
    db = tmp_path / "presettled.db"
    b = start_broker(store=f"sqlite:///{db}")
    p = Producer(b, "credit.presettled", settled=True)
    lock = hold_store(db)
    try:
        p.send_what_credit_allows(cap=5 * WINDOW)
        wait_for(lambda: journal_depth(b) == p.sent, message="every transfer taken")
        assert p.sent == WINDOW, f"{p.sent} presettled durable sends taken while nothing committed"
        assert p.granted() == WINDOW and journal_depth(b) == WINDOW
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    # Once stored: the credit comes back, and every message is on the queue once.
    while p.granted() <= WINDOW:
        p.client.read()
    wait_for(lambda: journal_depth(b) == 0, message="the units committed")
    assert queue_depth(b, "credit.presettled") == WINDOW
    p.client.close()


def test_many_producers_together_never_hold_more_than_the_journal_budget(start_broker, tmp_path):
    # Each producer attaches once the ones before it have sent all their credit: the credit
    # granted at attach comes out of what is left of the budget.
    db = tmp_path / "budget.db"
    b = start_broker(store=f"sqlite:///{db}")
    links = BUDGET // WINDOW + 3
    first = Producer(b, "credit.budget")  # the queue is created (and stored) before the lock
    lock = hold_store(db)
    producers = [first]
    try:
        first.send_what_credit_allows(cap=5 * WINDOW)
        while len(producers) < links:
            p = Producer(b, "credit.budget")
            p.send_what_credit_allows(cap=5 * WINDOW)
            producers.append(p)
            wait_for(lambda: journal_depth(b) == sum(p.sent for p in producers), message="every transfer taken")
        assert journal_depth(b) == BUDGET
        assert [p.sent for p in producers] == [WINDOW] * (BUDGET // WINDOW) + [0] * 3
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    # The store moves again: every producer (those that waited too) gets credit and is served.
    # Credit comes back in steps as units commit (a grant is cut to the journal's room at that
    # moment), so each producer sends its half window in as many rounds as its credit takes.
    for p in producers:
        cap = p.sent + WINDOW // 2
        while p.sent < cap:
            while p.granted() <= p.sent:
                p.client.read()
            p.send_what_credit_allows(cap=cap)
    for p in producers:
        assert p.read_outcomes(p.sent) == p.sent
    wait_for(lambda: journal_depth(b) == 0, message="the units committed")
    assert queue_depth(b, "credit.budget") == sum(p.sent for p in producers) == BUDGET + links * WINDOW // 2
    for p in producers:
        p.client.close()
