"""Issue 12, routing core: nothing a producer was told `accepted` is lost, a durable
subscription ends only by its own link, poison properties cannot make a dispatch pass lose
messages, a consumer that dies with a message in flight counts as a delivery attempt, and every
destination of a composite or divert applies its address-full policy."""
from __future__ import annotations

import subprocess
import sys
import uuid

from proton import Delivery, Message

from broker.tools.clients import management_call
from hermod_testing import wait_for
from wire_helpers import (DurableSubscription, connect, nothing_more, receive_bodies, send, sync,
                          topic)


def queues(url: str) -> dict[str, dict]:
    return {r["queue"]: r for r in management_call(url, "queue.stat")}


def addresses(url: str) -> set[str]:
    return {r["address"] for r in management_call(url, "address.stat")}


# -- defect 1: accepted, then dropped ---------------------------------------------------------------
def test_auto_created_queue_stays_while_a_sender_is_attached(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("orders")
    sender.send(Message(body="first"))
    r = conn.create_receiver("orders")
    assert receive_bodies(r, 1) == ["first"]
    r.close()
    sync(conn)
    assert "orders" in queues(broker.url)  # the sender still holds it
    later = sender.send(Message(body="second", durable=True))
    assert later.remote_state == Delivery.ACCEPTED
    again = conn.create_receiver("orders")
    assert receive_bodies(again, 1) == ["second"]
    again.close()
    sender.close()
    sync(conn)
    # The last sender gone, the drained auto-created queue and its address go as before.
    assert "orders" not in queues(broker.url) and "orders" not in addresses(broker.url)
    conn.close()


def test_multicast_address_of_an_attached_sender_stays_after_its_last_subscriber(broker):
    """Sends to a subscriber-less multicast address are dropped by design (accepted), not
    refused because the address went with the last subscription."""
    conn = connect(broker.url)
    sender = conn.create_sender("topic://ticker")
    sub = conn.create_receiver("ticker", options=[topic()])
    sender.send(Message(body="seen"))
    assert receive_bodies(sub, 1) == ["seen"]
    sub.close()
    sync(conn)
    assert "ticker" in addresses(broker.url)
    assert sender.send(Message(body="nobody listens")).remote_state == Delivery.ACCEPTED
    sub2 = conn.create_receiver("ticker", options=[topic()])
    sender.send(Message(body="seen again"))
    assert receive_bodies(sub2, 1) == ["seen again"]
    conn.close()


def test_durable_send_racing_the_auto_delete_of_its_queue_is_not_lost(start_broker, tmp_path):
    """A relayed durable transfer and the close of the queue's last consumer arrive in one
    batch: the store is still writing the message when the queue would go idle."""
    b = start_broker(store=f"sqlite:///{tmp_path / 'race.db'}")
    conn = connect(b.url)
    for i in range(5):
        name = f"race{i}"
        r = conn.create_receiver(name)
        relay = conn.create_sender(None)
        link = relay.link
        d = link.delivery(str(i))
        link.send(Message(address=name, body=f"m{i}", durable=True).encode())
        link.advance()
        r.link.close()  # written in the same batch as the transfer
        conn.wait(lambda: d.settled or d.remote_state, msg="outcome")
        if d.remote_state == Delivery.ACCEPTED:
            assert receive_bodies(conn.create_receiver(name), 1) == [f"m{i}"]
        else:  # refused is fine; accepted and gone is not
            assert d.remote_state in (Delivery.REJECTED, Delivery.RELEASED)
    conn.close()
