"""Dead-letter moves go through the store as one unit: after a SIGKILL and a restart a rejected
durable message is on the dead-letter queue, with its x-opt-ORIG-* annotations, and gone from
its queue; so is a message that used up its delivery attempts. On both back-ends."""
from __future__ import annotations

from proton import Message

from durable_clients import StoreView, body_of, queue_stats, receive_exactly, send_durable
from wire_helpers import connect, settle_modified

CONFIG = """
[[address_settings]]
match = "dl.retry"
max_delivery_attempts = 2
"""


def durable(body) -> Message:
    return Message(body=body, durable=True)


def test_rejected_and_exhausted_messages_are_on_the_dlq_after_a_restart(brokers):
    brokers.start(CONFIG)
    send_durable(brokers.url, "dl.orders", [durable("poison"), durable("fine")])
    send_durable(brokers.url, "dl.retry", [durable("flaky")])
    conn = connect(brokers.url)
    receiver = conn.create_receiver("dl.orders", credit=1)
    assert body_of(receiver.receive(timeout=10)) == "poison"
    receiver.reject()
    receiver.close()
    retry = conn.create_receiver("dl.retry", credit=1)
    for _ in range(2):  # the second failed attempt reaches max_delivery_attempts
        retry.receive(timeout=10)
        settle_modified(retry, failed=True)
    retry.close()
    # A commit barrier: once this durable message is accepted, the moves before it (same
    # connection, same journal, units in order) are committed too.
    conn.create_sender("dl.marker").send(durable("marker"))
    conn.close()
    with StoreView(brokers.store_url) as store:
        assert len(store.refs_of("dl.orders")) == 1
        assert store.refs_of("dl.retry") == []
        assert len(store.refs_of("DLQ")) == 2

    brokers.kill()
    brokers.start(CONFIG)
    queues = queue_stats(brokers.url)
    assert queues["dl.orders"]["messages"] == 1
    assert queues["DLQ"]["messages"] == 2 and queues["DLQ"]["durable"]
    dead = receive_exactly(brokers.url, "DLQ", 2)
    assert [body_of(m) for m in dead] == ["poison", "flaky"]
    assert [(m.annotations["x-opt-ORIG-ADDRESS"], m.annotations["x-opt-ORIG-QUEUE"]) for m in dead] \
        == [("dl.orders", "dl.orders"), ("dl.retry", "dl.retry")]
    assert [body_of(m) for m in receive_exactly(brokers.url, "dl.orders", 1)] == ["fine"]
    assert "dl.retry" not in queues or queues["dl.retry"]["messages"] == 0
