"""The PostgreSQL store lock and the session that writes (issue 19 item 1).

The lock is a session advisory lock: it lives exactly as long as the database session holding
it. If that session were not the one the journal commits on, ending it alone (an operator's
pg_terminate_backend, a proxy dropping one connection) would free the lock while the broker
still commits, and a second broker could take the store and hand out the same message ids.
Here the lock's session is ended from outside with real brokers on a real server: afterwards the
first broker commits nothing unless it holds the lock again, and whoever holds it is the only
one writing.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
from proton import Message

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "durable", TESTS / "wire", TESTS):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from durable_clients import AsyncProducer, body_of, receive_exactly, send_durable  # noqa: E402
from hermod_testing import wait_for  # noqa: E402

GIVE_UP_S = 2.0  # how long the first broker's units wait for a store it cannot write
TIMEOUT_S = 30

DURABLE_QUEUE = """
[[address]]
name = "orders"
routing = ["anycast"]
  [[address.queue]]
  name = "orders"
  routing = "anycast"
"""

# The store lock's advisory key (store/lock.py): pg_try_advisory_lock(0x48524D44, 1).
LOCK_KEY = (0x48524D44, 1)
LOCK_SESSIONS = ("SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
                 " AND l.classid = %s AND l.objid = %s AND l.objsubid = 2"
                 " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")


def durable(body) -> Message:
    return Message(body=body, durable=True)


def dsn(store_url: str) -> str:
    return store_url.replace("postgresql+psycopg://", "postgresql://", 1)


def lock_holders(store_url: str) -> list[int]:
    with psycopg.connect(dsn(store_url), autocommit=True) as connection:
        return [row[0] for row in connection.execute(LOCK_SESSIONS, LOCK_KEY).fetchall()]


def end_lock_session(store_url: str) -> int:
    """pg_terminate_backend of the session holding the store lock; returns once it is gone."""
    (pid,) = lock_holders(store_url)
    with psycopg.connect(dsn(store_url), autocommit=True) as connection:
        assert connection.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
    wait_for(lambda: pid not in lock_holders(store_url), timeout=TIMEOUT_S,
             message="the lock's session to end")
    return pid


def send_and_wait_outcome(url: str, body: str, timeout: float) -> AsyncProducer:
    producer = AsyncProducer(url, "orders", [(body, durable(body))])
    producer.start()
    wait_for(lambda: producer.accepted or producer.refused, timeout=timeout,
             message=f"an outcome for {body!r}")
    producer.join(timeout=TIMEOUT_S)
    return producer


def refused_start(store_url: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", store_url],
                          cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


def test_a_broker_that_lost_its_lock_session_to_a_second_broker_commits_nothing(
        pg_url, start_broker, tmp_path):
    first = start_broker(store=pg_url, config=DURABLE_QUEUE, env={"HERMOD_STORE_GIVE_UP_S": str(GIVE_UP_S)})
    send_durable(first.url, "orders", [durable("first-before")])

    end_lock_session(pg_url)
    second = start_broker(store=pg_url, config=DURABLE_QUEUE)  # the lock was free: it took it
    assert lock_holders(pg_url) != []

    # The first broker still serves its clients, but it cannot store: it must not accept.
    late = send_and_wait_outcome(first.url, "first-after", timeout=GIVE_UP_S + TIMEOUT_S)
    assert late.accepted == []
    assert [(key, outcome) for key, outcome, _ in late.refused] == [("first-after", "rejected")]
    assert any("in use by another broker" in line and f"pid {second.proc.pid}" in line
               for line in first.stderr_lines), "".join(first.stderr_lines)

    send_durable(second.url, "orders", [durable("second")])
    first.stop()
    second.stop()
    third = start_broker(store=pg_url, config=DURABLE_QUEUE)
    assert [body_of(m) for m in receive_exactly(third.url, "orders", 2)] == ["first-before", "second"]


def test_a_broker_whose_lock_session_ended_holds_the_lock_again_before_it_writes(
        pg_url, start_broker, tmp_path):
    first = start_broker(store=pg_url, config=DURABLE_QUEUE)
    send_durable(first.url, "orders", [durable("before")])

    ended = end_lock_session(pg_url)
    send_durable(first.url, "orders", [durable("after")])  # stored: so the lock is its own again

    holders = lock_holders(pg_url)
    assert len(holders) == 1 and holders != [ended]
    refused = refused_start(pg_url, tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"pid {first.proc.pid}" in refused.stderr
    assert [body_of(m) for m in receive_exactly(first.url, "orders", 2)] == ["before", "after"]
