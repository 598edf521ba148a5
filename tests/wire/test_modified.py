"""The `modified` outcome to the letter (AMQP 1.0 §3.4.5): its message-annotations are merged
into the message as it goes back to the queue (kept across a restart when durable), an
`x-opt-delivery-time` among them delays that message's redelivery alone, `undeliverable-here`
keeps it from that consumer only, and `delivery-failed` counts the attempt."""
from __future__ import annotations

import time

from proton import Message, symbol, timestamp

from wire_helpers import connect, nothing_more, receive_bodies, send, settle_modified


def modify(receiver, annotations: dict | None = None, failed: bool = False, undeliverable: bool = False) -> None:
    settle_modified(receiver, failed=failed, undeliverable=undeliverable, annotations=annotations)


def test_modified_annotations_are_merged_into_the_redelivered_message(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("mod.merge")
    sender.send(Message(body="payload", properties={"k": "v"}, subject="subj",
                        annotations={symbol("x-opt-kept"): "as sent", symbol("x-opt-reason"): "none yet"}))
    r = conn.create_receiver("mod.merge", credit=1)
    first = r.receive(timeout=10)
    assert first.annotations == {"x-opt-kept": "as sent", "x-opt-reason": "none yet"}
    modify(r, {symbol("x-opt-reason"): "timeout", symbol("x-opt-retries"): 3})
    again = r.receive(timeout=10)
    r.accept()
    assert again.body == "payload"
    assert again.properties == {"k": "v"} and again.subject == "subj"
    assert again.annotations == {"x-opt-kept": "as sent", "x-opt-reason": "timeout", "x-opt-retries": 3}
    assert again.delivery_count == 0  # not delivery-failed: not counted
    conn.close()


def test_delivery_failed_with_annotations_counts_the_attempt(broker):
    conn = connect(broker.url)
    send(conn, "mod.count", ["m"])
    r = conn.create_receiver("mod.count", credit=1)
    r.receive(timeout=10)
    modify(r, {symbol("x-opt-attempt"): "first"}, failed=True)
    second = r.receive(timeout=10)
    modify(r, {symbol("x-opt-attempt"): "second"}, failed=True)
    third = r.receive(timeout=10)
    r.accept()
    assert (second.delivery_count, third.delivery_count) == (1, 2)
    assert (second.annotations["x-opt-attempt"], third.annotations["x-opt-attempt"]) == ("first", "second")
    conn.close()


def test_delivery_time_in_the_annotations_delays_that_message_only(broker):
    conn = connect(broker.url)
    send(conn, "mod.delay", ["retry later", "next"])
    r = conn.create_receiver("mod.delay", credit=10)
    assert r.receive(timeout=10).body == "retry later"
    due = int(time.time() * 1000) + 1500
    modify(r, {symbol("x-opt-delivery-time"): timestamp(due)})
    assert receive_bodies(r, 1) == ["next"]  # the others are not held up
    assert nothing_more(r, timeout=0.5)  # not before its time
    late = r.receive(timeout=10)
    arrived = time.time() * 1000
    r.accept()
    assert late.body == "retry later"
    assert arrived >= due - 50  # the broker's and the test's clocks are the same clock
    conn.close()


def test_undeliverable_here_keeps_it_from_that_consumer_only(broker):
    conn = connect(broker.url)
    a = conn.create_receiver("mod.undeliverable", name="a", credit=5)
    send(conn, "mod.undeliverable", ["m"])
    assert a.receive(timeout=10).body == "m"
    b = conn.create_receiver("mod.undeliverable", name="b", credit=5)
    modify(a, {symbol("x-opt-refused-by"): "a"}, undeliverable=True)
    got = b.receive(timeout=10)
    b.accept()
    assert (got.body, got.annotations["x-opt-refused-by"]) == ("m", "a")
    assert nothing_more(a)
    conn.close()


def test_undeliverable_here_survives_the_annotation_rewrite_for_a_lone_consumer(broker):
    conn = connect(broker.url)
    a = conn.create_receiver("mod.lone", name="a", credit=5)
    send(conn, "mod.lone", ["m"])
    a.receive(timeout=10)
    modify(a, {symbol("x-opt-note"): "not for a"}, undeliverable=True)
    assert nothing_more(a)
    b = conn.create_receiver("mod.lone", name="b", credit=5)
    got = b.receive(timeout=10)
    b.accept()
    assert (got.body, got.annotations["x-opt-note"]) == ("m", "not for a")
    conn.close()


def test_merged_annotations_of_a_durable_message_survive_a_restart(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'modified.db'}"
    b = start_broker(store=store)
    conn = connect(b.url)
    conn.create_sender("mod.durable").send(Message(body="keep", durable=True))
    r = conn.create_receiver("mod.durable", credit=1)
    r.receive(timeout=10)
    modify(r, {symbol("x-opt-reason"): "restart"}, failed=True)
    r.close()  # the redelivery is not taken: the message waits on the queue
    conn.create_sender("hermod.management").close()  # a round trip: the outcome reached the broker
    conn.close()
    assert b.stop() == 0
    b = start_broker(store=store)
    conn = connect(b.url)
    r = conn.create_receiver("mod.durable", credit=1)
    got = r.receive(timeout=10)
    r.accept()
    assert (got.body, got.annotations, got.delivery_count) == ("keep", {"x-opt-reason": "restart"}, 1)
    assert nothing_more(r)
    conn.close()
