"""SIGKILL at a random point: what the journal confirmed is there after a restart, what it
confirmed as deleted stays deleted, and nothing is duplicated or reordered.

A child process drives the journal like a broker (a window of units in flight) and prints the
id of each unit as its `done(None)` arrives; the test kills it mid-stream and recovers.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from hermod import store
from hermod.store.lock import StoreLocked
from store_testing import queue, setup_ops, submit_and_wait, wait_until

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

CHILD = textwrap.dedent("""
    import sys, threading
    from hermod import store
    from hermod.broker.core.ports import DeleteReference
    from store_testing import send

    url, mode, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    journal = store.open_journal(url, None, sqlite_synchronous="NORMAL")
    window = threading.Semaphore(200)
    print("ready", flush=True)

    def confirmed(n):
        def done(error):
            if error is None:
                print(n, flush=True)
            window.release()
        return done

    n = first
    while True:
        window.acquire()
        unit = send(n, "orders") if mode == "send" else [DeleteReference("orders", n)]
        journal.submit(unit, confirmed(n))
        n += 1
""")


def run_and_kill(url: str, mode: str, first: int, confirmations: int) -> list[int]:
    """The ids confirmed before the child was killed, at a random point after `confirmations`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, mode, str(first)],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "ready"
        confirmed: list[int] = []
        target = confirmations + random.randrange(confirmations)
        while len(confirmed) < target:
            line = child.stdout.readline()
            assert line, "the child stopped by itself"
            confirmed.append(int(line))
        child.send_signal(signal.SIGKILL)
        confirmed.extend(int(line) for line in child.stdout.read().split())
    finally:
        child.kill()
        child.wait(10)
    return confirmed


def test_sigkill_loses_nothing_confirmed_and_brings_back_nothing_acknowledged(store_url):
    journal = store.open_journal(store_url, None)
    submit_and_wait(journal, setup_ops(queue("orders")))
    journal.close()

    sent = run_and_kill(store_url, "send", 1, 1000)
    recovered = _recover_ids(store_url)
    assert sent == list(range(1, len(sent) + 1))  # confirmed in submission order
    # Every confirmed message is there; beyond them at most the units in flight, in order.
    assert recovered[:len(sent)] == sent
    assert recovered == list(range(1, len(recovered) + 1))

    acked = run_and_kill(store_url, "ack", 1, 400)
    remaining = _recover_ids(store_url)
    assert acked == list(range(1, len(acked) + 1))
    gone = len(recovered) - len(remaining)
    assert gone >= len(acked)  # plus at most the acknowledgements in flight
    assert remaining == recovered[gone:]


def _recover_ids(url: str) -> list[int]:
    journal = _open_after_kill(url)
    try:
        return [r.message.id for r in journal.recover().references["orders"]]
    finally:
        journal.close()


def _open_after_kill(url: str):
    """The journal, once the killed child's store lock is gone. On PostgreSQL the lock goes with
    the child's session, which the server ends when it sees the connection closed: at once when
    the session was waiting for the child, a few ms later when it was in a statement (a busy
    writer), and the child's exit is seen here first."""
    opened = []

    def attempt() -> bool:
        try:
            opened.append(store.open_journal(url, None))
        except StoreLocked:
            return False
        return True

    wait_until(attempt, timeout=10, what="the killed child's store lock to go")
    return opened[0]
