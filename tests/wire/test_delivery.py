"""Delivery features on the wire with python-qpid-proton clients."""
from __future__ import annotations

import time

from proton import Message, Timeout, symbol
from proton.reactor import LinkOption

from wire_helpers import connect, nothing_more, receive_bodies, settle_modified


def send(conn, address, *messages):
    s = conn.create_sender(address)
    for m in messages:
        s.send(m)
    s.close()


class Priority(LinkOption):
    def __init__(self, priority: int):
        self.priority = priority

    def apply(self, link) -> None:
        link.properties = {symbol("priority"): self.priority}


def test_higher_priority_messages_are_delivered_first(broker):
    conn = connect(broker.url)
    send(conn, "d.prio", *[Message(body=f"p{p}", priority=p) for p in (1, 9, 4, 7)])
    assert receive_bodies(conn.create_receiver("d.prio"), 4) == ["p9", "p7", "p4", "p1"]
    conn.close()


def test_message_group_sticks_to_one_consumer(broker):
    conn = connect(broker.url)
    a = conn.create_receiver("d.group", name="a", credit=20)
    b = conn.create_receiver("d.group", name="b", credit=20)
    send(conn, "d.group", *[Message(body=f"{g}{i}", group_id=g) for i in range(4) for g in ("x", "y")])
    got_a, got_b = [], []
    for _ in range(8):
        for r, got in ((a, got_a), (b, got_b)):
            try:
                got.append(r.receive(timeout=0.2).body)
                r.accept()
            except Timeout:  # this consumer had nothing right now
                pass
        if len(got_a) + len(got_b) == 8:
            break
    assert len(got_a) + len(got_b) == 8
    assert len({m[0] for m in got_a}) <= 1 and len({m[0] for m in got_b}) <= 1
    conn.close()


def test_consumer_priority_from_link_property(broker):
    conn = connect(broker.url)
    low = conn.create_receiver("d.cprio", name="low", credit=10)
    high = conn.create_receiver("d.cprio", name="high", credit=10, options=[Priority(5)])
    send(conn, "d.cprio", *[Message(body=i) for i in range(5)])
    assert receive_bodies(high, 5) == [0, 1, 2, 3, 4]
    assert nothing_more(low)
    conn.close()


def test_consumer_priority_from_address_suffix(broker):
    conn = connect(broker.url)
    low = conn.create_receiver("d.sfx", name="low", credit=10)
    high = conn.create_receiver("d.sfx?consumer-priority=3", name="high", credit=10)
    send(conn, "d.sfx", *[Message(body=i) for i in range(3)])
    assert receive_bodies(high, 3) == [0, 1, 2]
    assert nothing_more(low)
    conn.close()


def test_expired_message_goes_to_the_expiry_queue_with_actual_expiry(start_broker):
    b = start_broker(config="[server]\nexpiry_scan_ms = 100\n")
    conn = connect(b.url)
    expired = conn.create_receiver("ExpiryQueue")
    sent = int(time.time() * 1000)
    send(conn, "d.ttl", Message(body="short", ttl=0.05), Message(body="long", ttl=60))
    m = expired.receive(timeout=10)  # found by the periodic scan: nobody consumes d.ttl
    expired.accept()
    assert m.body == "short"
    assert m.annotations["x-opt-ORIG-ADDRESS"] == "d.ttl"
    assert m.annotations["x-opt-ACTUAL-EXPIRY"] >= sent + 50
    assert receive_bodies(conn.create_receiver("d.ttl"), 1) == ["long"]
    conn.close()


def test_scheduled_delivery_by_delay_annotation(broker):
    conn = connect(broker.url)
    r = conn.create_receiver("d.sched", credit=10)
    sent = time.time()
    send(conn, "d.sched", Message(body="later", annotations={symbol("x-opt-delivery-delay"): 600}),
         Message(body="now"))
    assert receive_bodies(r, 1) == ["now"]
    m = r.receive(timeout=10)
    r.accept()
    assert m.body == "later" and time.time() - sent >= 0.55
    conn.close()


def test_scheduled_delivery_by_time_annotation(broker):
    conn = connect(broker.url)
    r = conn.create_receiver("d.at", credit=10)
    at = int(time.time() * 1000) + 500
    send(conn, "d.at", Message(body="at", annotations={symbol("x-opt-delivery-time"): at}))
    m = r.receive(timeout=10)
    r.accept()
    assert m.body == "at" and time.time() * 1000 >= at - 5
    conn.close()


def test_exclusive_queue_from_config(start_broker):
    b = start_broker(config="""
[[address]]
name = "d.ex"
  [[address.queue]]
  name = "d.ex"
  exclusive = true
""")
    conn = connect(b.url)
    first = conn.create_receiver("d.ex", name="first", credit=10)
    second = conn.create_receiver("d.ex", name="second", credit=10)
    send(conn, "d.ex", *[Message(body=i) for i in range(4)])
    assert receive_bodies(first, 4) == [0, 1, 2, 3]
    assert nothing_more(second)
    first.close()
    send(conn, "d.ex", Message(body="next"))
    assert receive_bodies(second, 1) == ["next"]
    conn.close()


def test_last_value_queue_from_config(start_broker):
    b = start_broker(config="""
[[address]]
name = "d.lvq"
  [[address.queue]]
  name = "d.lvq"
  last_value_key = "_AMQ_LVQ_NAME"
""")
    conn = connect(b.url)
    send(conn, "d.lvq", *[Message(body=f"{k}{v}", properties={"_AMQ_LVQ_NAME": k})
                          for v in range(3) for k in ("a", "b")])
    r = conn.create_receiver("d.lvq")
    assert receive_bodies(r, 2) == ["a2", "b2"]
    assert nothing_more(r)
    conn.close()


def test_redelivery_delay(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "d.slow"
redelivery_delay_ms = 400
""")
    conn = connect(b.url)
    send(conn, "d.slow", Message(body="m"))
    r = conn.create_receiver("d.slow", credit=1)
    r.receive(timeout=10)
    failed_at = time.time()
    settle_modified(r, failed=True)
    m = r.receive(timeout=10)
    r.accept()
    assert m.delivery_count == 1 and time.time() - failed_at >= 0.35
    conn.close()


def test_duplicate_id_resend_is_accepted_and_dropped(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("d.dup")
    for body, dup in (("first", "id-1"), ("resend", "id-1"), ("second", "id-2")):
        sender.send(Message(body=body, properties={"_AMQ_DUPL_ID": dup}))  # each one accepted
    r = conn.create_receiver("d.dup")
    assert receive_bodies(r, 2) == ["first", "second"]
    assert nothing_more(r)
    conn.close()


def test_a_run_the_output_budget_cuts_short_delivers_each_message_once_in_order(broker):
    """A consumer with credit for a waiting backlog takes it as one run; 30 x 200 KiB is past
    the connection's output budget (1 MiB between flushes), so the run stops part-way and the
    rest goes back to the queue in its place, for the next flushes: each message once, in order."""
    conn = connect(broker.url)
    bodies = [bytes([i]) * 200_000 for i in range(30)]
    send(conn, "d.run", *[Message(body=b) for b in bodies])
    receiver = conn.create_receiver("d.run", credit=30)
    got = receive_bodies(receiver, 30)
    assert [b[0] for b in got] == list(range(30))
    assert got == bodies
    assert nothing_more(receiver)
    conn.close()
