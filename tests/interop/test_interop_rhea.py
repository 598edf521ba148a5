"""rhea (Node.js) clients against a real broker, alone and mixed with the Python client."""
from __future__ import annotations

import base64

import pytest

from interop_clients import bodies, eventually, queue_stats, require_selectors
from wire_helpers import Caps, Message, connect, receive_bodies, send, topic


def test_rhea_send_then_rhea_receive_on_a_queue(broker, rhea_send, rhea_receive):
    sent = rhea_send.run(url=broker.url, address="orders", count=20).ok()
    assert sent.summary == {"event": "summary", "sent": 20, "accepted": 20, "rejected": 0, "released": 0,
                            "modified": 0}

    got = rhea_receive.run(url=broker.url, address="orders", count=20).ok()
    assert got.bodies == bodies("message {n}", range(20))
    assert got.summary["received"] == 20
    # every message was acknowledged: the auto-created queue is empty (or gone, being auto-deleted)
    eventually(lambda: queue_stats(broker.url).get("orders", {"messages": 0})["messages"] == 0,
               message="orders drained")


def test_rhea_receiver_takes_its_count_and_leaves_the_rest_queued(broker, rhea_send, rhea_receive):
    rhea_send.run(url=broker.url, address="jobs", count=5, body="job {n}").ok()
    first = rhea_receive.run(url=broker.url, address="jobs", count=2).ok()
    rest = rhea_receive.run(url=broker.url, address="jobs", count=3).ok()
    assert first.bodies == ["job 0", "job 1"]
    assert rest.bodies == ["job 2", "job 3", "job 4"]


def test_rhea_sender_to_python_receiver(broker, rhea_send):
    rhea_send.run(url=broker.url, address="py.in", count=4, body="from node {n}", cycle="color=red,blue",
                  property=["seq={n}", "origin=rhea"], subject="greeting {n}", durable=True).ok()
    rhea_send.run(url=broker.url, address="py.in", count=1, body="raw bytes", binary=True).ok()

    conn = connect(broker.url)
    try:
        r = conn.create_receiver("py.in")
        msgs = []
        for _ in range(5):
            m = r.receive(timeout=10)
            r.accept()
            msgs.append(m)
    finally:
        conn.close()
    assert [m.body for m in msgs[:4]] == bodies("from node {n}", range(4))
    assert bytes(msgs[4].body) == b"raw bytes"
    assert [m.properties for m in msgs[:4]] == [
        {"color": c, "seq": n, "origin": "rhea"} for n, c in enumerate(["red", "blue", "red", "blue"])]
    assert all(isinstance(m.properties["seq"], int) for m in msgs[:4])
    assert [m.subject for m in msgs[:4]] == [f"greeting {n}" for n in range(4)]
    assert all(m.durable for m in msgs[:4])


def test_python_sender_to_rhea_receiver(broker, rhea_receive):
    conn = connect(broker.url)
    try:
        sender = conn.create_sender("node.in")
        sender.send(Message(body="text", properties={"k": "v", "i": 7}, subject="s", durable=True))
        sender.send(Message(body=b"\x00\x01binary"))
        sender.send(Message(body=42))
        sender.send(Message(body={"a": 1, "b": "two"}))
        sender.close()
    finally:
        conn.close()

    got = rhea_receive.run(url=broker.url, address="node.in", count=4).ok()
    assert got.bodies == ["text", {"binary": base64.b64encode(b"\x00\x01binary").decode()}, 42,
                          {"a": 1, "b": "two"}]
    first = got.messages[0]
    assert first["properties"] == {"k": "v", "i": 7}
    assert first["subject"] == "s"
    assert first["durable"] is True


@pytest.mark.parametrize("how", ["capability", "prefix"])
def test_rhea_multicast_every_subscriber_gets_every_message(broker, rhea_send, rhea_receive, how):
    if how == "capability":
        target = dict(address="news", capability="topic")
    else:
        target = dict(address="multicast://news")
    subs = [rhea_receive.start(url=broker.url, address="news", capability="topic", count=10) for _ in range(2)]
    for s in subs:
        s.ready()
    rhea_send.run(url=broker.url, count=10, body="headline {n}", **target).ok()
    for s in subs:
        assert s.finish().ok().bodies == bodies("headline {n}", range(10))


def test_rhea_anycast_consumers_share_a_queue(broker, rhea_send, rhea_receive):
    consumers = [rhea_receive.start(url=broker.url, address="work", count=3) for _ in range(2)]
    for c in consumers:
        c.ready()
    rhea_send.run(url=broker.url, address="work", count=6).ok()
    got = [c.finish().ok().bodies for c in consumers]
    assert sorted(got[0] + got[1]) == bodies("message {n}", range(6))
    assert len(got[0]) == len(got[1]) == 3


def test_rhea_selector_consumer_takes_only_matching_messages(broker, rhea_send, rhea_receive):
    require_selectors()
    rhea_send.run(url=broker.url, address="paint", count=6, cycle="color=red,blue", property="n={n}").ok()
    red = rhea_receive.run(url=broker.url, address="paint", count=3, selector="color = 'red'").ok()
    assert red.bodies == bodies("message {n}", [0, 2, 4])
    assert {m["properties"]["color"] for m in red.messages} == {"red"}
    # the others stay on the queue for a consumer without a selector
    rest = rhea_receive.run(url=broker.url, address="paint", count=3).ok()
    assert rest.bodies == bodies("message {n}", [1, 3, 5])


def test_rhea_selector_on_a_topic_subscription(broker, rhea_send, rhea_receive):
    require_selectors()
    big = rhea_receive.start(url=broker.url, address="trades", capability="topic", count=2,
                             selector="qty >= 300 AND side = 'buy'")
    every = rhea_receive.start(url=broker.url, address="trades", capability="topic", count=5)
    big.ready()
    every.ready()
    rhea_send.run(url=broker.url, address="trades", capability="topic", count=5, property="qty={n}00",
                  cycle="side=buy,sell,buy,buy,buy").ok()
    assert big.finish().ok().bodies == bodies("message {n}", [3, 4])
    assert every.finish().ok().bodies == bodies("message {n}", range(5))


def test_rhea_invalid_selector_is_refused_with_invalid_field(broker, rhea_receive):
    require_selectors()
    got = rhea_receive.run(url=broker.url, address="paint", count=1, selector="color = ")
    assert got.rc == 2, got.transcript()
    assert [(e["where"], e["condition"]) for e in got.errors] == [("receiver", "amqp:invalid-field")]


def test_rhea_durable_subscription_survives_detach_and_resumes(broker, rhea_send, rhea_receive):
    sub = dict(url=broker.url, address="prices", capability="topic", durable="ticker", client_id="app")
    # attach once to create the subscription, then detach (not close): it stays
    created = rhea_receive.run(count=0, **sub).ok()
    assert created.events[0]["source"]["durable"] == 2
    rhea_send.run(url=broker.url, address="prices", capability="topic", count=5, body="price {n}").ok()
    q = eventually(lambda: (s := queue_stats(broker.url).get("app.ticker")) and s["messages"] == 5 and s,
                   message="5 messages kept for the detached subscription app.ticker")
    assert (q["address"], q["routing_type"], q["durable"], q["consumers"]) == ("prices", "multicast", True, 0)

    assert rhea_receive.run(count=2, **sub).ok().bodies == bodies("price {n}", [0, 1])
    rhea_send.run(url=broker.url, address="prices", capability="topic", count=2, body="late {n}").ok()
    assert rhea_receive.run(count=5, **sub).ok().bodies == (bodies("price {n}", [2, 3, 4])
                                                            + bodies("late {n}", [0, 1]))
    # closing the link (JMS unsubscribe) deletes it
    rhea_receive.run(count=0, unsubscribe=True, **sub).ok()
    eventually(lambda: "app.ticker" not in queue_stats(broker.url), message="app.ticker deleted")


def test_rhea_non_durable_subscriber_misses_what_was_sent_while_away(broker, rhea_send, rhea_receive):
    first = rhea_receive.start(url=broker.url, address="alerts", capability="topic", count=1)
    first.ready()
    rhea_send.run(url=broker.url, address="alerts", capability="topic", count=1, body="one").ok()
    assert first.finish().ok().bodies == ["one"]
    rhea_send.run(url=broker.url, address="alerts", capability="topic", count=1, body="missed").ok()
    second = rhea_receive.start(url=broker.url, address="alerts", capability="topic", count=1)
    second.ready()
    rhea_send.run(url=broker.url, address="alerts", capability="topic", count=1, body="two").ok()
    assert second.finish().ok().bodies == ["two"]


def test_python_and_rhea_subscribers_on_one_topic(broker, rhea_send, rhea_receive):
    node_sub = rhea_receive.start(url=broker.url, address="mixed", capability="topic", count=4)
    node_sub.ready()
    conn = connect(broker.url)
    try:
        py_sub = conn.create_receiver("mixed", options=topic())
        rhea_send.run(url=broker.url, address="mixed", capability="topic", count=3).ok()
        send(conn, "mixed", ["from python"], options=Caps("topic", on="target"))
        expected = bodies("message {n}", range(3)) + ["from python"]
        assert receive_bodies(py_sub, 4) == expected
    finally:
        conn.close()
    assert node_sub.finish().ok().bodies == expected


def test_rhea_plain_login_over_tls(start_broker, rhea_send, rhea_receive, tmp_path_factory, monkeypatch):
    """Issue 13: rhea logs in with SASL PLAIN over TLS to a broker with anonymous logins off; a
    wrong password is refused."""
    import shutil
    import sys
    from pathlib import Path
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
    from certs import make_all

    from hermod.broker.security.passwords import hash_password
    pki = make_all(tmp_path_factory.mktemp("pki"))
    b = start_broker(config=(
        f'[server]\ntls = true\n[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'
        '[security]\nanonymous = false\n'
        f'[[security.user]]\nname = "carol"\npassword_hash = "{hash_password("carol-pw")}"\nroles = ["any"]\n'))
    monkeypatch.setenv("HERMOD_CA", str(pki / "ca.crt"))
    url = b.url.replace("amqps://", "amqps://carol:carol-pw@")
    sent = rhea_send.run(url=url, address="tls.orders", count=3).ok()
    assert sent.summary["accepted"] == 3
    got = rhea_receive.run(url=url, address="tls.orders", count=3).ok()
    assert got.bodies == bodies("message {n}", range(3))
    refused = rhea_send.run(url=b.url.replace("amqps://", "amqps://carol:wrong@"), address="tls.orders", count=1)
    assert refused.rc != 0
    assert any("logged in as carol (PLAIN)" in line for line in b.stderr_lines)
    assert any("login failed for user 'carol' with PLAIN" in line for line in b.stderr_lines)
