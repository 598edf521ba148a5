"""A page read the store refuses for a while: the paged queue waits and reads again, and once the
store answers every message is received exactly once, in order, with no broker restart.

PostgreSQL refuses the read for real: the broker runs as a role of its own (not a superuser,
the owner of its database), and SELECT on its messages table is revoked from that role, then
granted again. Nothing is acknowledged while the grant is away (deleting a message's last
reference reads the messages table too); the receiver takes what was in memory and waits.
"""
from __future__ import annotations

import psycopg
from proton import Message, Timeout

from durable_clients import TIMEOUT, body_of, queue_stats, send_durable
from hermod_testing import wait_for
from wire_helpers import connect

ROLE = "hermod_paging"
COUNT = 300
CONFIG = """
[[address_settings]]
match = "paged.#"
max_size_bytes = 4000
address_full_policy = "page"
"""


def _superuser(cluster, database: str = "postgres"):
    return psycopg.connect(cluster.dsn(database), autocommit=True)


def _own_database(cluster, name: str) -> str:
    """A database owned by a plain role (the broker creates its tables, owns them, and can have
    SELECT revoked: a superuser could not)."""
    with _superuser(cluster) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f"DROP ROLE IF EXISTS {ROLE}")
        c.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER")
        c.execute(f'CREATE DATABASE "{name}" OWNER {ROLE}')
    return f"postgresql+psycopg://{ROLE}@127.0.0.1:{cluster.port}/{name}"


def _drop(cluster, name: str) -> None:
    with _superuser(cluster) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f"DROP ROLE IF EXISTS {ROLE}")


def _page_read_failures(broker) -> int:
    return sum("paging in failed" in line for line in broker.stderr_lines)


def test_a_refused_page_read_is_read_again_and_nothing_is_lost(durable_pg_cluster, start_broker):
    name = "hermod_page_read_fault"
    url = _own_database(durable_pg_cluster, name)
    try:
        broker = start_broker(config=CONFIG, store=url)
        bodies = [f"m{i:04d}" + "x" * 200 for i in range(COUNT)]
        send_durable(broker.url, "paged.q", [Message(body=b, durable=True) for b in bodies])
        stats = queue_stats(broker.url)["paged.q"]
        assert stats["messages"] == COUNT

        with _superuser(durable_pg_cluster, name) as admin:
            admin.execute(f"REVOKE SELECT ON messages FROM {ROLE}")
            conn = connect(broker.url)
            try:
                receiver = conn.create_receiver("paged.q", credit=COUNT + 10)
                in_memory = []
                # What was in memory arrives; the read of the rest fails, and fails again on retry.
                wait_for(lambda: _page_read_failures(broker) >= 2, timeout=TIMEOUT,
                         message="two failed page reads")
                while True:
                    try:
                        in_memory.append(body_of(receiver.receive(timeout=0)))
                    except Timeout:  # nothing more has arrived
                        break
                assert len(in_memory) < COUNT
                assert in_memory == bodies[:len(in_memory)]

                admin.execute(f"GRANT SELECT ON messages TO {ROLE}")
                got = list(in_memory)
                while len(got) < COUNT:
                    got.append(body_of(receiver.receive(timeout=TIMEOUT)))
                assert got == bodies  # each once, in order
                for _ in got:
                    receiver.accept()
                try:  # also sends the accepts: a blocking connection does I/O only while it waits
                    extra = receiver.receive(timeout=0.3)  # a bound on a negative
                except Timeout:
                    extra = None
                assert extra is None, f"a message came twice: {body_of(extra)!r}"
                wait_for(lambda: queue_stats(broker.url)["paged.q"]["messages"] == 0,
                         timeout=TIMEOUT, message="every message acknowledged")
            finally:
                conn.close()
        assert broker.proc.poll() is None  # no restart
        broker.stop()
    finally:
        _drop(durable_pg_cluster, name)
