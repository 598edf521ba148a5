"""Credit: producers are paced by the broker's credit; consumers get no more than they grant;
a drain ends with the credit used up."""
from __future__ import annotations

from proton import Message

from wire_helpers import connect, nothing_more, receive_bodies, send


def test_producer_gets_credit_and_it_is_refilled(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("flow.p")
    assert sender.link.credit == 1000
    for i in range(2500):  # more than one window: the broker must top credit up
        sender.send(Message(body=i))
    assert sender.link.credit > 0
    r = conn.create_receiver("flow.p", credit=2500)
    assert receive_bodies(r, 2500)[-1] == 2499
    conn.close()


def test_consumer_receives_no_more_than_its_credit(broker):
    conn = connect(broker.url)
    send(conn, "flow.c", list(range(5)))
    r = conn.create_receiver("flow.c", credit=2)
    r.fetcher.prefetch = 0
    got = [r.receive(timeout=10).body for _ in range(2)]
    assert got == [0, 1]
    r.accept()
    r.accept()
    conn.close()


def test_drain_with_nothing_left_ends_with_no_message(broker):
    conn = connect(broker.url)
    send(conn, "flow.d", ["only"])
    r = conn.create_receiver("flow.d", credit=0)
    link = r.link
    link.drain(10)
    conn.wait(lambda: not link.draining() or link.credit == 0, msg="drain to complete")
    assert link.credit == 0
    assert [r.receive(timeout=10).body] == ["only"]
    r.accept()
    assert nothing_more(r)
    conn.close()
