"""Acknowledgements a consumer's connection reads in one burst reach their queues as one batch
(ConsumerLink.take_acks): before anything else the burst holds, and each to its own queue."""
from __future__ import annotations

from hermod.broker.tools.clients import management_call
from wire_helpers import connect, nothing_more, receive_bodies, send, sync


def stats(url: str) -> dict[str, dict]:
    return {r["queue"]: r for r in management_call(url, "queue.stat")}


def test_acknowledgements_written_with_the_links_close_are_not_redelivered(broker):
    conn = connect(broker.url)
    bodies = [f"m{i}" for i in range(20)]
    send(conn, "acks.close", bodies)
    r = conn.create_receiver("acks.close", name="first", credit=20)
    received = [r.receive(timeout=10) for _ in bodies]
    for _ in bodies:
        r.accept()  # queued locally: the dispositions and the detach leave in one write
    r.close()
    assert [m.body for m in received] == bodies
    again = conn.create_receiver("acks.close", name="second", credit=20)
    assert nothing_more(again)
    assert stats(broker.url)["acks.close"]["messages"] == 0
    conn.close()


def test_a_composite_sources_acknowledgements_reach_each_part(broker):
    conn = connect(broker.url)
    send(conn, "acks.p1", [f"a{i}" for i in range(10)])
    send(conn, "acks.p2", [f"b{i}" for i in range(10)])
    r = conn.create_receiver("acks.p1,acks.p2", name="both", credit=20)
    got = receive_bodies(r, 20)
    sync(conn)
    assert sorted(got) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    s = stats(broker.url)
    assert [(s[q]["acked"], s[q]["messages"]) for q in ("acks.p1", "acks.p2")] == [(10, 0), (10, 0)]
    conn.close()
