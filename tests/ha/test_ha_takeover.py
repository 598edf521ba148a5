"""Shared-store HA takeovers (contract, "High availability and bridges"): the backup serves
within the lease plus recovery after the live broker is SIGKILLed, SIGSTOPped or cut off from
the database; the old live broker stops serving before its lease can expire and, woken up after
a takeover, commits nothing; clients that follow the failover list lose no accepted message and
see no acknowledged one again, and messages in flight to consumers are redelivered."""
from __future__ import annotations

import signal
import threading
import time

import psycopg
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, SendException

from ha_testing import (BACKUP, LEASE_S, QUEUE, drain, failover_urls, probe, refuses_tcp,
                        send_durable)

from hermod_testing import wait_for

RECOVERY_S = 15  # start-up and recovery of a small store, on a loaded 2-core machine


def pair(nodes, url):
    live = nodes("node-a", url)
    live_url = live.wait_ready()
    backup = nodes("node-b", url)
    backup.wait_line(BACKUP, 20)
    failover = wait_for(lambda: failover_urls(probe(live_url).properties or {}), 10,
                        message="node-b in node-a's failover-server-list")
    return live, live_url, backup, failover[0]


def sql(cluster, database, query, *args):
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        cursor = connection.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def stored_refs(cluster, database) -> int:
    return sql(cluster, database, "SELECT count(*) FROM message_refs")[0][0]


class Producer(threading.Thread):
    """Sends numbered durable messages until its connection breaks; `accepted` are the ones
    the broker accepted, `attempted` every one it tried."""

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.url, self.prefix = url, prefix
        self.accepted: list[str] = []
        self.attempted: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        connection = BlockingConnection(self.url, timeout=30)
        sender = connection.create_sender(QUEUE)
        try:
            for n in range(100_000):
                body = f"{self.prefix}-{n}"
                self.attempted.append(body)
                sender.send(Message(body=body, durable=True))
                self.accepted.append(body)
        except (ConnectionException, SendException) as error:
            self.error = error


def test_sigkill_of_the_live_broker_mid_traffic_loses_nothing_accepted(ha_db, nodes):
    cluster, database, url = ha_db
    live, live_url, backup, failover = pair(nodes, url)
    first = send_durable(live_url, [f"first-{n}" for n in range(40)])
    consumer = BlockingConnection(live_url, timeout=10)
    receiver = consumer.create_receiver(QUEUE, credit=20)
    acknowledged = []
    for _ in range(10):
        acknowledged.append(receiver.receive(timeout=10).body)
        receiver.accept()
    in_flight = [receiver.receive(timeout=10).body for _ in range(10)]  # never settled
    # The client's loop sends the dispositions; the store has them once 30 references remain.
    consumer.wait(lambda: stored_refs(cluster, database) == 30, timeout=10, msg="the acks stored")
    producer = Producer(live_url, "during")
    producer.start()
    wait_for(lambda: len(producer.accepted) >= 20, 20, message="traffic during the kill")

    live.signal(signal.SIGKILL)
    killed = time.monotonic()
    producer.join(30)
    new_url = backup.wait_ready(LEASE_S + RECOVERY_S)
    takeover_s = time.monotonic() - killed

    assert new_url == failover  # clients that follow the failover list find it
    assert takeover_s < LEASE_S + RECOVERY_S
    got = drain(failover)
    assert len(got) == len(set(got)), "a message came twice"
    assert not set(got) & set(acknowledged), "an acknowledged message came back"
    assert set(in_flight) <= set(got), "messages in flight to the dead broker's consumer are lost"
    expected = set(first) - set(acknowledged)
    assert expected <= set(got)
    assert set(producer.accepted) <= set(got), "an accepted message is lost"
    assert set(got) <= expected | set(producer.attempted)


def test_a_sigstopped_live_broker_is_fenced_when_it_wakes_after_a_takeover(ha_db, nodes):
    cluster, database, url = ha_db
    live, live_url, backup, failover = pair(nodes, url)
    accepted = send_durable(live_url, ["before-0", "before-1"])
    producer = BlockingConnection(live_url, timeout=60)
    sender = producer.create_sender(QUEUE)

    live.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    new_url = backup.wait_ready(LEASE_S + RECOVERY_S)
    assert time.monotonic() - stopped < LEASE_S + RECOVERY_S
    # A transfer written into the stopped broker's socket: it reads it the moment it wakes.
    late = sender.link.send(Message(body="late", durable=True))
    producer.wait(lambda: producer.conn.transport.pending() == 0, timeout=10, msg="transfer written")
    live.signal(signal.SIGCONT)
    answer = probe(live_url)  # a connection made the moment it wakes

    assert answer.properties is None or answer.condition is not None, "it served a connection"
    if answer.condition is not None:
        assert answer.condition.name == "amqp:connection:forced"
    assert live.proc.wait(20) == 1
    assert any("lost the store lease" in line for line in live.stderr), live.stderr
    try:
        producer.wait(lambda: late.settled, timeout=10, msg="the late transfer settled")
    except ConnectionException:
        pass  # closed by the fenced broker: so much the better
    assert late.remote_state != late.ACCEPTED, "the fenced broker accepted a message"
    assert refuses_tcp(live_url)
    assert sql(cluster, database, "SELECT count(*) FROM messages WHERE position('late'::bytea IN encoded) > 0") == [(0,)]
    assert sorted(drain(new_url)) == accepted


def test_a_live_broker_cut_off_from_the_database_stops_before_its_lease_expires(ha_db, nodes):
    cluster, database, url = ha_db
    sql(cluster, database, "CREATE ROLE node_a LOGIN SUPERUSER")
    live = nodes("node-a", url.replace("postgres@", "node_a@"))
    live_url = live.wait_ready()
    backup = nodes("node-b", url)
    backup.wait_line(BACKUP, 20)
    accepted = send_durable(live_url, ["kept-0", "kept-1", "kept-2"])

    # Cut: node_a may not log in any more, and its sessions are ended.
    sql(cluster, database, "ALTER ROLE node_a NOLOGIN")
    sql(cluster, database, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'node_a'")
    wait_for(lambda: not sql(cluster, database, "SELECT 1 FROM pg_stat_activity WHERE usename = 'node_a'"),
             10, message="node_a's sessions gone")
    expires = sql(cluster, database, "SELECT expires_at FROM ha_lease WHERE node = 'node-a'")[0][0]

    wait_for(lambda: refuses_tcp(live_url), LEASE_S + 5, interval=0.02, message="node-a stops serving")
    assert sql(cluster, database, "SELECT clock_timestamp() < %s", expires) == [(True,)], \
        "node-a still served when its lease expired"
    new_url = backup.wait_ready(LEASE_S + RECOVERY_S)
    assert live.proc.wait(20) == 1
    assert sorted(drain(new_url)) == accepted
