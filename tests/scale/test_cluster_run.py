"""`hermod run` with [ha] mode = "cluster" (docs/scale-out.md): several live brokers on one
PostgreSQL, each queue owned by one node; consumers of another node's queue are redirected,
a dead node's queues are taken over by the others."""
from __future__ import annotations

import psycopg

from cluster_testing import REDIRECT, followed, receive, redirect_of, send

from hermod_testing import wait_for


def sql(cluster, database, query, *args):
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        cursor = connection.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def owners(cluster, database) -> dict[str, str]:
    return dict(sql(cluster, database, "SELECT o.queue, n.node FROM queue_owners o"
                                       " JOIN cluster_nodes n ON n.holder = o.holder"))


def test_two_nodes_serve_their_own_queues_and_redirect_consumers(scale_db, cluster_nodes):
    cluster, database, url = scale_db
    a, b = cluster_nodes("node-a", url), cluster_nodes("node-b", url)
    a_url, b_url = a.wait_ready(), b.wait_ready()
    assert send(a_url, "qa", ["a1", "a2"]) == ["a1", "a2"]
    assert send(b_url, "qb", ["b1"]) == ["b1"]
    assert owners(cluster, database) == {"qa": "node-a", "qb": "node-b"}
    # ids from disjoint blocks: no message of one node overwrote the other's
    assert sorted(r[0] for r in sql(cluster, database, "SELECT count(*) FROM messages")) == [3]
    # node-b learns who owns qa within a renew period (until then an attach is refused)
    name, info = wait_for(lambda: _redirected(b_url, "qa"), 10, message="qa redirected by node-b")
    assert f"amqp://{info['network-host']}:{int(info['port'])}" == a_url
    assert info["address"] == "qa"
    assert followed(b_url, "qa") == a_url
    assert receive(a_url, "qa") == ["a1", "a2"]
    assert receive(b_url, "qb") == ["b1"]


def _redirected(url: str, address: str):
    refusal = redirect_of(url, address)
    return refusal if refusal is not None and refusal[0] == REDIRECT else None
