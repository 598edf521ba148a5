"""`hermod run` with [ha] mode = "cluster" (docs/scale-out.md): several live brokers on one
PostgreSQL, each queue owned by one node; consumers of another node's queue are redirected,
a dead node's queues are taken over by the others."""
from __future__ import annotations

import signal
import threading

import psycopg
from proton import ConnectionException, Disposition, Message, Timeout
from proton.utils import BlockingConnection, LinkDetached, SendException

from cluster_testing import (REDIRECT, followed, receive, redirect_of, redirected,
                             refusal_of_send, send)

from hermod_testing import wait_for


def sql(cluster, database, query, *args):
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        cursor = connection.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def owners(cluster, database) -> dict[str, str]:
    """queue -> its live owner's node name."""
    return dict(sql(cluster, database, "SELECT o.queue, n.node FROM queue_owners o"
                                       " JOIN cluster_nodes n ON n.holder = o.holder"
                                       " WHERE n.expires_at > clock_timestamp()"))


def test_two_nodes_serve_their_own_queues_and_redirect_consumers(scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a, b = cluster_nodes("node-a", url), cluster_nodes("node-b", url)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(a_url, "qa", ["a1", "a2"]) == ["a1", "a2"]
    assert send(b_url, "qb", ["b1"]) == ["b1"]
    assert owners(cluster, database) == {"qa": "node-a", "qb": "node-b"}
    # ids from disjoint blocks: no message of one node overwrote the other's
    assert sorted(r[0] for r in sql(cluster, database, "SELECT count(*) FROM messages")) == [3]
    # node-b learns who owns qa (a notification, or its lookup of a name it does not know)
    name, info = wait_for(lambda: redirected(b_url, "qa"), 10, message="qa redirected by node-b")
    assert f"amqp://{info['network-host']}:{int(info['port'])}" == a_url
    assert info["address"] == "qa"
    assert followed(b_url, "qa") == a_url
    assert receive(a_url, "qa") == ["a1", "a2"]
    assert receive(b_url, "qb") == ["b1"]


class _Producer(threading.Thread):
    """Sends numbered durable messages to `address` until its connection breaks; `accepted`
    are the ones the broker accepted."""

    def __init__(self, url: str, address: str) -> None:
        super().__init__(daemon=True)
        self.url, self.address = url, address
        self.accepted: list[str] = []

    def run(self) -> None:
        try:
            connection = BlockingConnection(self.url, timeout=30)
            sender = connection.create_sender(self.address)
            for n in range(100_000):
                body = f"m-{n}"
                sender.send(Message(body=body, durable=True))
                self.accepted.append(body)
        except (ConnectionException, SendException, LinkDetached, Timeout):
            return  # the node died: what it accepted is known


def test_a_killed_nodes_queue_is_taken_over_and_nothing_accepted_is_lost(scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a, b, c = (cluster_nodes(n, url) for n in ("node-a", "node-b", "node-c"))
    a_url, b_url, c_url = a.wait_ready(), b.wait_ready(), c.wait_ready()
    producer = _Producer(a_url, "orders")
    producer.start()
    wait_for(lambda: len(producer.accepted) >= 200, 30, message="200 messages accepted by node-a")
    acknowledged = receive(a_url, "orders", count=50)
    assert len(acknowledged) == 50
    wait_for(lambda: len(producer.accepted) >= 300, 30, message="300 messages accepted by node-a")
    a.proc.kill()  # SIGKILL mid-traffic
    a.proc.wait()
    producer.join(30)
    accepted = set(producer.accepted)

    new_owner = wait_for(lambda: owners(cluster, database).get("orders") in ("node-b", "node-c")
                         and owners(cluster, database)["orders"], 30,
                         message="a survivor owns orders")
    # a consumer that connected to either survivor ends up on the new owner
    owner_url = wait_for(lambda: _followed_or_none(b_url, "orders"), 15,
                         message="node-b sends consumers of orders to its owner")
    assert owner_url == {"node-b": b_url, "node-c": c_url}[new_owner]
    assert wait_for(lambda: _followed_or_none(c_url, "orders"), 15,
                    message="node-c sends consumers of orders to its owner") == owner_url
    received = receive(owner_url, "orders", idle_s=3)
    assert not set(acknowledged) & set(received), "an acknowledged message came back"
    missing = accepted - set(acknowledged) - set(received)
    assert not missing, f"{len(missing)} accepted messages lost, e.g. {sorted(missing)[:5]}"
    assert len(received) == len(set(received))


def _followed_or_none(url: str, address: str):
    """Where a consumer ends up, or None while the node still refuses it or sends it to the
    dead node (its routing cache is up to one renew period old)."""
    refusal = redirect_of(url, address)
    if refusal is None:
        return url
    if refusal[0] != REDIRECT:
        return None
    try:
        return followed(url, address)
    except ConnectionException:  # redirected to the node that was killed: not learnt yet
        return None


def test_a_send_to_another_nodes_queue_is_forwarded_and_accepted_once_stored_there(
        scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a, b = cluster_nodes("node-a", url), cluster_nodes("node-b", url)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(a_url, "qa", ["a1"]) == ["a1"]
    wait_for(lambda: redirected(b_url, "qa"), 10, message="node-b knows node-a owns qa")
    assert send(b_url, "qa", ["via-b-1", "via-b-2"]) == ["via-b-1", "via-b-2"]
    # stored by node-a, in its queue: node-b stored nothing of them
    assert owners(cluster, database) == {"qa": "node-a"}
    assert receive(a_url, "qa") == ["a1", "via-b-1", "via-b-2"]


def test_a_send_for_an_unreachable_owner_is_refused_never_accepted(scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a = cluster_nodes("node-a", url, lease_s=30)  # still the owner while it is gone
    b = cluster_nodes("node-b", url, lease_s=30)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(a_url, "qa", ["a1"]) == ["a1"]
    wait_for(lambda: redirected(b_url, "qa"), 10, message="node-b knows node-a owns qa")
    a.proc.kill()
    a.proc.wait()
    assert refusal_of_send(b_url, "qa", "lost?") == Disposition.REJECTED
    bodies = [row[0] for row in sql(cluster, database, "SELECT encoded FROM messages")]
    assert len(bodies) == 1 and b"lost?" not in bytes(bodies[0])


def test_a_paused_node_stops_serving_once_woken_after_losing_its_queues(scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a, b = cluster_nodes("node-a", url), cluster_nodes("node-b", url)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(a_url, "qa", ["p1", "p2", "p3"]) == ["p1", "p2", "p3"]
    a.signal(signal.SIGSTOP)
    wait_for(lambda: owners(cluster, database).get("qa") == "node-b", 30,
             message="node-b took qa over from the paused node-a")
    a.signal(signal.SIGCONT)
    assert a.proc.wait(timeout=30) == 1
    assert "stopped serving" in "".join(a.stderr)
    assert receive(b_url, "qa") == ["p1", "p2", "p3"]


def test_a_queue_just_created_on_one_node_is_known_at_once_on_the_other(scale_db, cluster_nodes):
    """No waiting for a renew period: node-b's claim is announced (pg_notify), and a name node-a
    does not know is looked up once before it answers."""
    cluster, database, url = scale_db
    a, b = cluster_nodes("node-a", url, lease_s=30), cluster_nodes("node-b", url, lease_s=30)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(b_url, "fresh", ["f1"]) == ["f1"]
    refusal = redirect_of(a_url, "fresh")  # at once: not after a renew period
    assert refusal is not None and refusal[0] == REDIRECT, refusal
    assert f"amqp://{refusal[1]['network-host']}:{int(refusal[1]['port'])}" == b_url
    assert send(b_url, "fresh2", ["g1"]) == ["g1"]
    assert send(a_url, "fresh2", ["g2"]) == ["g2"]  # forwarded to node-b, not internal-error
    assert owners(cluster, database) == {"fresh": "node-b", "fresh2": "node-b"}
    assert receive(b_url, "fresh") == ["f1"]
    assert receive(b_url, "fresh2") == ["g1", "g2"]


def test_forwarded_copies_are_stamped_per_queue_and_a_resend_is_stored_once(
        scale_db, cluster_nodes):
    """A message for two queues of one address on another node reaches both (the copies'
    `_AMQ_DUPL_ID` stamps differ per queue), and the producer's resend with its own
    `_AMQ_DUPL_ID` is dropped by the owner: each queue holds one copy."""
    cluster, database, url = scale_db
    b = cluster_nodes("node-b", url, lease_s=30, extra=(
        '[[address]]\nname = "news"\nrouting = ["multicast"]\n'
        '[[address.queue]]\nname = "s1"\nrouting = "multicast"\n'
        '[[address.queue]]\nname = "s2"\nrouting = "multicast"\n'))
    b_url = b.wait_ready()
    a = cluster_nodes("node-a", url, lease_s=30)
    a_url = a.wait_ready()
    assert owners(cluster, database) == {"s1": "node-b", "s2": "node-b"}
    connection = BlockingConnection(a_url, timeout=10)
    try:
        sender = connection.create_sender("news")
        for _ in range(2):  # the second is the producer's resend
            sender.send(Message(body="n1", durable=True, properties={"_AMQ_DUPL_ID": "d-1"}))
        sender.send(Message(body="n2", durable=True))
    finally:
        connection.close()
    stamps = sorted(row[0] for row in sql(cluster, database, "SELECT duplicate_id FROM duplicate_ids"))
    assert "d-1@s1" in stamps and "d-1@s2" in stamps, stamps
    for queue in ("s1", "s2"):
        got = _receive_all(b_url, f"news::{queue}")
        assert [m.body for m in got] == ["n1", "n2"], queue
        assert got[0].properties["_AMQ_DUPL_ID"] == f"d-1@{queue}"
        assert got[1].properties["_AMQ_DUPL_ID"].endswith(f"@{queue}")
        assert got[1].properties["_AMQ_DUPL_ID"].startswith("node-a ")


def _receive_all(url: str, address: str) -> list[Message]:
    connection = BlockingConnection(url, timeout=10)
    try:
        receiver = connection.create_receiver(address, credit=10)
        got = []
        while True:
            try:
                got.append(receiver.receive(timeout=2))
            except Timeout:
                return got
            receiver.accept()
    finally:
        connection.close()
