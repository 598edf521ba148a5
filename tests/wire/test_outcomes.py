"""Consumer outcomes with the Artemis semantics, delivery counts, dead letters, and refusals."""
from __future__ import annotations

import subprocess
import sys

import pytest
from proton import Delivery
from proton.utils import LinkDetached

from hermod.broker.tools.clients import management_call
from wire_helpers import (connect, nothing_more, receive_bodies, send, settle_modified, sync, topic)


def stats(url: str) -> dict[str, dict]:
    return {r["queue"]: r for r in management_call(url, "queue.stat")}


def test_released_message_comes_back_without_counting_an_attempt(broker):
    conn = connect(broker.url)
    send(conn, "out.rel", ["m"])
    r = conn.create_receiver("out.rel", credit=1)
    first = r.receive(timeout=10)
    r.release(delivered=False)
    again = r.receive(timeout=10)
    r.accept()
    assert (first.body, first.delivery_count) == ("m", 0)
    assert (again.body, again.delivery_count) == ("m", 0)
    conn.close()


def test_modified_delivery_failed_counts_the_attempt(broker):
    conn = connect(broker.url)
    send(conn, "out.mod", ["m"])
    r = conn.create_receiver("out.mod", credit=1)
    r.receive(timeout=10)
    settle_modified(r, failed=True)
    second = r.receive(timeout=10)
    settle_modified(r, failed=True)
    third = r.receive(timeout=10)
    r.accept()
    assert (second.delivery_count, third.delivery_count) == (1, 2)
    conn.close()


def test_modified_undeliverable_here_never_returns_to_that_consumer(broker):
    conn = connect(broker.url)
    a = conn.create_receiver("out.und", name="a", credit=5)
    send(conn, "out.und", ["m"])
    a.receive(timeout=10)
    settle_modified(a, failed=False, undeliverable=True)
    assert nothing_more(a)
    b = conn.create_receiver("out.und", name="b", credit=5)
    assert receive_bodies(b, 1) == ["m"]
    conn.close()


def test_rejected_goes_straight_to_the_dead_letter_queue_with_orig_annotations(broker):
    conn = connect(broker.url)
    send(conn, "out.rej", ["poison"])
    r = conn.create_receiver("out.rej", credit=1)
    r.receive(timeout=10)
    r.reject()
    dlq = conn.create_receiver("DLQ")
    m = dlq.receive(timeout=10)
    dlq.accept()
    assert m.body == "poison"
    assert m.annotations["x-opt-ORIG-ADDRESS"] == "out.rej"
    assert m.annotations["x-opt-ORIG-QUEUE"] == "out.rej"
    assert isinstance(m.annotations["x-opt-ORIG-MESSAGE-ID"], int)
    assert nothing_more(r)
    conn.close()


def test_max_delivery_attempts_moves_to_the_dead_letter_address(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "retry.#"
max_delivery_attempts = 3
dead_letter_address = "retry.dead"
""")
    conn = connect(b.url)
    send(conn, "retry.x", ["m"])
    r = conn.create_receiver("retry.x", credit=1)
    counts = []
    for _ in range(3):
        counts.append(r.receive(timeout=10).delivery_count)
        settle_modified(r, failed=True)
    assert counts == [0, 1, 2]
    assert nothing_more(r)
    dead = conn.create_receiver("retry.dead")
    assert receive_bodies(dead, 1) == ["m"]
    conn.close()


def test_unsettled_messages_of_a_closed_consumer_return_in_order(broker):
    conn = connect(broker.url)
    send(conn, "out.back", [1, 2, 3, 4])
    r = conn.create_receiver("out.back", name="first", credit=10)
    assert receive_bodies(r, 3, settle=False) == [1, 2, 3]
    r.close()
    r2 = conn.create_receiver("out.back", name="second", credit=10)
    got = [r2.receive(timeout=10) for _ in range(4)]
    assert [m.body for m in got] == [1, 2, 3, 4]
    assert [m.delivery_count for m in got] == [0, 0, 0, 0]
    conn.close()


def test_messages_of_a_killed_client_return(broker):
    conn = connect(broker.url)
    send(conn, "out.drop", ["a", "b"])
    script = (
        "import sys\n"
        "from proton.utils import BlockingConnection\n"
        "c = BlockingConnection(sys.argv[1], timeout=10)\n"
        "r = c.create_receiver('out.drop', credit=10)\n"
        "r.receive(); r.receive()\n"
        "print('got', flush=True)\n"
        "sys.stdin.read()\n")
    client = subprocess.Popen([sys.executable, "-c", script, broker.url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline().strip() == "got"
    client.kill()  # no detach, no close: the socket just goes
    client.wait()
    assert receive_bodies(conn.create_receiver("out.drop"), 2) == ["a", "b"]
    conn.close()


def test_presettled_consumer_takes_messages_at_once(broker):
    from proton.reactor import AtMostOnce
    conn = connect(broker.url)
    send(conn, "out.pre", ["x", "y"])
    r = conn.create_receiver("out.pre", options=[AtMostOnce()])
    assert [r.receive(timeout=10).body for _ in range(2)] == ["x", "y"]
    sync(conn)
    s = stats(broker.url)["out.pre"]
    assert (s["acked"], s["messages"]) == (2, 0)
    conn.close()


def test_presettled_producer(broker):
    from proton.reactor import AtMostOnce
    conn = connect(broker.url)
    sender = conn.create_sender("out.presend", options=[AtMostOnce()])
    from proton import Message
    for i in range(3):
        sender.send(Message(body=i))
    assert receive_bodies(conn.create_receiver("out.presend"), 3) == [0, 1, 2]
    conn.close()


# -- refusals -----------------------------------------------------------------------------------


def test_unknown_address_with_auto_create_off_is_not_found(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "#"
auto_create_addresses = false
auto_create_queues = false
""")
    conn = connect(b.url)
    for attach in (lambda: conn.create_sender("nowhere"), lambda: conn.create_receiver("nowhere")):
        with pytest.raises(LinkDetached) as e:
            attach()
        assert e.value.condition == "amqp:not-found"
    conn.close()


def test_topic_capability_on_an_anycast_only_address_is_illegal_state(start_broker):
    b = start_broker(config="""
[[address]]
name = "only.any"
routing = ["anycast"]
  [[address.queue]]
  name = "only.any"
""")
    conn = connect(b.url)
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("only.any", options=[topic()])
    assert e.value.condition == "amqp:illegal-state"
    conn.close()


def test_queue_at_max_consumers_is_resource_limit_exceeded(start_broker):
    b = start_broker(config="""
[[address]]
name = "solo"
  [[address.queue]]
  name = "solo"
  max_consumers = 1
""")
    conn = connect(b.url)
    conn.create_receiver("solo", name="one")
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("solo", name="two")
    assert e.value.condition == "amqp:resource-limit-exceeded"
    conn.close()


def test_anonymous_relay_to_unknown_address_without_auto_create_is_rejected(start_broker):
    from proton import Message
    from proton.utils import SendException
    b = start_broker(config="""
[[address_settings]]
match = "#"
auto_create_addresses = false
""")
    conn = connect(b.url)
    sender = conn.create_sender(None)
    with pytest.raises(SendException) as e:
        sender.send(Message(address="ghost", body="x"))
    assert e.value.state == Delivery.REJECTED
    conn.close()


def test_queue_deleted_under_a_consumer_closes_it_with_resource_deleted(broker):
    conn = connect(broker.url)

    class DynamicTarget:
        def apply(self, link):
            link.target.dynamic = True
            link.target.address = None

        def test(self, link):
            return True

    sender = conn.create_sender(None, options=[DynamicTarget()])
    name = sender.link.remote_target.address
    assert name
    other = connect(broker.url)
    consumer = other.create_receiver(name)
    sender.close()  # the temporary queue goes with the link that made it
    with pytest.raises(LinkDetached) as e:
        consumer.receive(timeout=10)
    assert e.value.condition == "amqp:resource-deleted"
    conn.close()
