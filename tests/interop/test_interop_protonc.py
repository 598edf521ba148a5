"""Proton C clients (interop/protonc, built against Debian's libqpid-proton dev package)."""
from __future__ import annotations

import base64

from interop_clients import bodies, eventually, queue_stats, require_selectors


def test_protonc_send_then_protonc_receive(broker, protonc_send, protonc_receive):
    sent = protonc_send.run(url=broker.url, address="c.orders", count=10, body="c message {n}",
                            property=["seq={n}", "lang=c"], durable=True).ok()
    assert sent.summary == {"event": "summary", "sent": 10, "accepted": 10, "rejected": 0, "released": 0,
                            "modified": 0}
    got = protonc_receive.run(url=broker.url, address="c.orders", count=10).ok()
    assert got.bodies == bodies("c message {n}", range(10))
    assert [m["properties"] for m in got.messages] == [{"seq": n, "lang": "c"} for n in range(10)]
    assert all(m["durable"] and m["delivery_count"] == 0 for m in got.messages)


def test_protonc_sender_to_rhea_receiver(broker, protonc_send, rhea_receive):
    protonc_send.run(url=broker.url, address="c.to.node", count=5, property="seq={n}").ok()
    got = rhea_receive.run(url=broker.url, address="c.to.node", count=5).ok()
    assert got.bodies == bodies("message {n}", range(5))
    assert [m["properties"]["seq"] for m in got.messages] == list(range(5))


def test_rhea_sender_to_protonc_receiver(broker, rhea_send, protonc_receive):
    rhea_send.run(url=broker.url, address="node.to.c", count=3, cycle="color=red,blue", subject="s{n}").ok()
    rhea_send.run(url=broker.url, address="node.to.c", count=1, body="bytes", binary=True).ok()
    got = protonc_receive.run(url=broker.url, address="node.to.c", count=4).ok()
    assert got.bodies == bodies("message {n}", range(3)) + [{"binary": base64.b64encode(b"bytes").decode()}]
    assert [m["properties"]["color"] for m in got.messages[:3]] == ["red", "blue", "red"]
    assert [m["subject"] for m in got.messages[:3]] == ["s0", "s1", "s2"]


def test_protonc_multicast_reaches_protonc_and_rhea_subscribers(broker, protonc_send, protonc_receive,
                                                                rhea_receive):
    subs = [protonc_receive.start(url=broker.url, address="c.news", capability="topic", count=4),
            rhea_receive.start(url=broker.url, address="c.news", capability="topic", count=4)]
    for s in subs:
        s.ready()
    protonc_send.run(url=broker.url, address="c.news", capability="topic", count=4).ok()
    for s in subs:
        assert s.finish().ok().bodies == bodies("message {n}", range(4))


def test_protonc_durable_subscription_detach_and_resume(broker, protonc_send, protonc_receive):
    sub = dict(url=broker.url, address="c.prices", capability="topic", durable="csub", client_id="capp")
    protonc_receive.run(count=0, **sub).ok()
    protonc_send.run(url=broker.url, address="c.prices", capability="topic", count=3).ok()
    eventually(lambda: queue_stats(broker.url)["capp.csub"]["messages"] == 3, message="3 kept for capp.csub")
    assert protonc_receive.run(count=3, **sub).ok().bodies == bodies("message {n}", range(3))
    protonc_receive.run(count=0, unsubscribe=True, **sub).ok()
    eventually(lambda: "capp.csub" not in queue_stats(broker.url), message="capp.csub deleted")


def test_protonc_selector_consumer(broker, protonc_send, protonc_receive):
    require_selectors()
    protonc_send.run(url=broker.url, address="c.sel", count=6, property="n={n}").ok()
    got = protonc_receive.run(url=broker.url, address="c.sel", count=3, selector="n > 2").ok()
    assert got.bodies == bodies("message {n}", [3, 4, 5])


def test_protonc_refused_attach_reports_the_condition(broker, protonc_send, protonc_receive):
    # "c.jobs" becomes an anycast-only address; a topic subscription on it is illegal-state
    protonc_send.run(url=broker.url, address="c.jobs", capability="queue", count=1).ok()
    got = protonc_receive.run(url=broker.url, address="c.jobs", capability="topic", count=1)
    assert got.rc == 2, got.transcript()
    assert [(e["where"], e["condition"]) for e in got.errors] == [("receiver", "amqp:illegal-state")]
