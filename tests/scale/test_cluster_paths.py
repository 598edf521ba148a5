"""Cluster mode: every way a message is stored reaches a queue another node owns by forwarding
to the owner (the contract's "High availability and bridges"; issue 28, finding 7). Two nodes
on one PostgreSQL: node-b owns `qb`, node-a owns `src`, `DLQ` and the divert `div-in` -> `qb`.
Each path taken on node-a (a plain send, a composite part, a transactional send, a management
send over HTTP, move, retry, the divert) and a dead letter made on node-b ends on the owner,
received there exactly once. With the owner gone every path is refused (`amqp:internal-error`
for AMQP, an error status over HTTP) and nothing is stored on node-a."""
from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
from proton import Message
from proton.reactor import DurableSubscription
from proton.utils import BlockingConnection

from cluster_testing import receive, redirected, send
from hermod_testing import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "wire"))
from test_transactions import TxClient  # noqa: E402

HTTP = re.compile(r"^hermod http on (http://\S+)")
INTERNAL_ERROR = "amqp:internal-error"
REJECTED = 37  # proton's Disposition.REJECTED

OWNER_CONFIG = ('[[address]]\nname = "qb"\n[[address.queue]]\nname = "qb"\n'
                '[[address]]\nname = "qc"\n[[address.queue]]\nname = "qc"\n')
ENTRY_CONFIG = ('[[address]]\nname = "src"\n[[address.queue]]\nname = "src"\n'
                '[[address]]\nname = "DLQ"\n[[address.queue]]\nname = "DLQ"\n'
                '[[address]]\nname = "div-in"\nrouting = ["multicast"]\n'
                '[[divert]]\nname = "to-qb"\naddress = "div-in"\nforwarding_address = "qb"\n'
                'routing_type = "anycast"\n')


def sql(cluster, database, query, *args):
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        cursor = connection.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def owners(cluster, database) -> dict[str, str]:
    return dict(sql(cluster, database, "SELECT o.queue, n.node FROM queue_owners o"
                                       " JOIN cluster_nodes n ON n.holder = o.holder"
                                       " WHERE n.expires_at > clock_timestamp()"))


def http(base: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict | None]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, None


def queue_count(base: str, name: str) -> int:
    status, row = http(base, "GET", f"/api/queues/{name}")
    assert status == 200, (name, status)
    return row["messages"]


def outcome(url: str, address: str, body: str, **props) -> tuple[int, str | None]:
    """(disposition, condition name) of one durable send, waited for."""
    connection = BlockingConnection(url, timeout=30)
    try:
        sender = connection.create_sender(address)
        delivery = sender.send(Message(body=body, durable=True, properties=props or None),
                               timeout=30, error_states=())
        condition = delivery.remote.condition
        return delivery.remote_state, condition.name if condition else None
    finally:
        connection.close()


def composite_outcome(url: str, target: str, body: str) -> tuple[int, str | None]:
    return outcome(url, target, body)


def transactional_send(url: str, address: str, body: str) -> tuple[tuple, tuple[str, str | None]]:
    """One send in a transaction, committed: (the transfer's outcome, the commit's)."""
    client = TxClient(url)
    try:
        sender = client.sender(address)
        txn = client.declare()
        sent = client.send(sender, body, txn, durable=True).result(30)
        return sent, client.commit(txn)
    finally:
        client.close()


def reject_one(url: str, address: str) -> str:
    """Receive one message and reject it (the owner dead-letters it)."""
    connection = BlockingConnection(url, timeout=10)
    try:
        receiver = connection.create_receiver(address, credit=1)
        message = receiver.receive(timeout=10)
        receiver.reject()
        return message.body
    finally:
        connection.close()


def start_pair(scale_db, cluster_nodes, lease_s: float = 2):
    """node-b (owner of qb, qc) first, then node-a: node-a reads qb's definition from the store."""
    cluster, database, url = scale_db
    b = cluster_nodes("node-b", url, lease_s=lease_s, http=True, extra=OWNER_CONFIG)
    b_url = b.wait_ready()
    a = cluster_nodes("node-a", url, lease_s=lease_s, http=True, extra=ENTRY_CONFIG)
    a_url = a.wait_ready()
    a_http = a.wait_line(HTTP, 10).group(1)
    b_http = b.wait_line(HTTP, 10).group(1)
    expected = {"qb": "node-b", "qc": "node-b", "src": "node-a", "DLQ": "node-a"}
    wait_for(lambda: owners(cluster, database) == expected, 10, message=f"owners {expected}")
    wait_for(lambda: redirected(a_url, "qb"), 10, message="node-a knows node-b owns qb")
    return a, b, a_url, b_url, a_http, b_http


def test_every_way_a_message_is_stored_reaches_the_owner_once(scale_db, cluster_nodes):
    a, b, a_url, b_url, a_http, b_http = start_pair(scale_db, cluster_nodes)
    # a client's send, and each part of a composite (qc is node-b's, src node-a's own)
    assert send(a_url, "qb", ["plain"]) == ["plain"]
    assert composite_outcome(a_url, "qc,src", "composite") == (36, None)  # ACCEPTED
    # a transactional send
    sent, committed = transactional_send(a_url, "qb", "in-txn")
    assert committed == ("committed", None), committed
    # a management send over HTTP
    status, answer = http(a_http, "POST", "/api/addresses/qb/messages", {"body": "managed", "durable": True})
    assert status == 200 and answer["routed_to"] == ["qb"], (status, answer)
    # a divert on node-a into node-b's queue
    assert send(a_url, "div-in", ["diverted"]) == ["diverted"]
    # move: from node-a's src to node-b's qb
    assert send(a_url, "src", ["moved"]) == ["moved"]
    assert receive(a_url, "src", count=1) == ["composite"]  # the composite's own part
    status, answer = http(a_http, "POST", "/api/queues/src/move", {"to": "qb"})
    assert (status, answer) == (200, {"moved": 1}), (status, answer)
    assert queue_count(a_http, "src") == 0

    assert receive(b_url, "qc") == ["composite"]
    assert receive(b_url, "qb") == ["plain", "in-txn", "managed", "diverted", "moved"]

    # a dead letter made on node-b into node-a's DLQ, then retried from there into qb
    assert send(a_url, "qb", ["doomed"]) == ["doomed"]
    assert reject_one(b_url, "qb") == "doomed"
    wait_for(lambda: queue_count(a_http, "DLQ") == 1, 15, message="the dead letter on node-a's DLQ")
    status, answer = http(a_http, "POST", "/api/queues/DLQ/retry", {})
    assert (status, answer) == (200, {"moved": 1}), (status, answer)
    assert queue_count(a_http, "DLQ") == 0
    assert receive(b_url, "qb") == ["doomed"]
    # node-a never held any of node-b's messages
    assert queue_count(a_http, "qb") == 0 and queue_count(a_http, "qc") == 0
    assert receive(a_url, "DLQ", idle_s=1) == []


def test_with_the_owner_down_every_way_is_refused_and_nothing_is_stored_on_the_wrong_node(
        scale_db, cluster_nodes):
    cluster, database, _url = scale_db
    a, b, a_url, b_url, a_http, b_http = start_pair(scale_db, cluster_nodes, lease_s=60)
    assert send(a_url, "src", ["keep-1"]) == ["keep-1"]
    stored_before = sql(cluster, database, "SELECT count(*) FROM messages")[0][0]
    b.proc.kill()  # SIGKILL: node-b still owns qb and qc until its lease runs out
    b.proc.wait()

    assert outcome(a_url, "qb", "plain") == (REJECTED, INTERNAL_ERROR)
    assert composite_outcome(a_url, "qc,src", "composite") == (REJECTED, INTERNAL_ERROR)
    assert outcome(a_url, "div-in", "diverted") == (REJECTED, INTERNAL_ERROR)
    sent, committed = transactional_send(a_url, "qb", "in-txn")
    assert committed[0] == "failed", committed
    status, _ = http(a_http, "POST", "/api/addresses/qb/messages", {"body": "managed", "durable": True})
    assert status >= 500, status
    status, _ = http(a_http, "POST", "/api/queues/src/move", {"to": "qb"})
    assert status >= 500, status

    # nothing of these is on node-a or in the store; the moved message is still in src
    assert queue_count(a_http, "qb") == 0 and queue_count(a_http, "qc") == 0
    assert queue_count(a_http, "src") == 1
    assert sql(cluster, database, "SELECT count(*) FROM messages")[0][0] == stored_before
    assert receive(a_url, "src") == ["keep-1"]


def test_a_subscription_made_on_another_node_later_gets_what_this_node_is_sent(scale_db, cluster_nodes):
    """node-a started before node-b's durable subscription existed: it learns the definition
    (never the messages) and forwards multicast sends there instead of dropping them."""
    a, b, a_url, b_url, a_http, b_http = start_pair(scale_db, cluster_nodes)
    subscriber = BlockingConnection(b_url, timeout=10)
    try:
        receiver = subscriber.create_receiver("topic://news", name="sub-1", options=DurableSubscription())
        wait_for(lambda: any(row["address"] == "news" for row in http(a_http, "GET", "/api/queues")[1]),
                 15, message="node-a knows node-b's subscription on news")
        assert send(a_url, "topic://news", ["n1", "n2"]) == ["n1", "n2"]
        got = [receiver.receive(timeout=10).body for _ in range(2)]
        receiver.accept()
        assert got == ["n1", "n2"]
    finally:
        subscriber.close()
    assert all(row["messages"] == 0 for row in http(a_http, "GET", "/api/queues")[1]
               if row["address"] == "news")
