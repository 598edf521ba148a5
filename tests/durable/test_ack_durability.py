"""Acknowledgements a client settled before a clean close, or before a later round trip the
broker answered, are stored before the broker answers (contract, "Delivery guarantees"; issue
12, defect 15).

The client accepts and settles messages, makes a round trip (a link attach and detach), closes
its connection cleanly and the broker is SIGKILLed at once: none of those messages may come
back. On PostgreSQL the race is made certain, not lucky: a statement trigger makes every
commit that deletes references (every acknowledgement) take 300 ms, so a broker that answers
before the commit is caught on every run.
"""
from __future__ import annotations

import pytest
from proton import Message

from durable_clients import DurableBrokers, body_of, drain_queue, send_durable, slow_down_acknowledgements
from wire_helpers import connect, sync

QUEUE = "acks"
CONFIG = f"""
[[address]]
name = "{QUEUE}"
routing = ["anycast"]

[[address.queue]]
name = "{QUEUE}"
routing = "anycast"
durable = true
"""
MESSAGES = 12
ACKED = 5
def acknowledge_then_close(url: str, count: int, round_trip: bool) -> list[str]:
    connection = connect(url)
    receiver = connection.create_receiver(QUEUE, credit=count)
    bodies = []
    for _ in range(count):
        bodies.append(body_of(receiver.receive(timeout=15)))
        receiver.accept()  # accepted and settled by the client
    if round_trip:
        sync(connection)
    connection.close()  # returns once the broker answered the close
    return bodies


@pytest.mark.parametrize("round_trip", [True, False], ids=["round-trip", "close-only"])
@pytest.mark.parametrize("run", range(5))
def test_acknowledged_messages_stay_gone_after_a_clean_close_and_a_sigkill(start_broker, store_url,
                                                                          run, round_trip):
    brokers = DurableBrokers(start_broker, store_url)
    brokers.start(CONFIG)
    sent = [f"m{n}" for n in range(MESSAGES)]
    send_durable(brokers.url, QUEUE, [Message(body=b, durable=True) for b in sent])
    if brokers.backend == "postgresql":
        slow_down_acknowledgements(store_url)

    acknowledged = acknowledge_then_close(brokers.url, ACKED, round_trip)
    brokers.kill()

    assert acknowledged == sent[:ACKED]
    brokers.start(CONFIG)
    assert [body_of(m) for m in drain_queue(brokers.url, QUEUE)] == sent[ACKED:]


def test_a_burst_of_acknowledgements_sent_with_the_detach_is_stored_as_one(start_broker, store_url):
    """Twenty durable messages accepted and the link closed in one write: the broker reads the
    burst as one batch of acknowledgements (one store unit). After the close, a SIGKILL and a
    restart, none of them comes back and the five not received are all there, in order."""
    brokers = DurableBrokers(start_broker, store_url)
    brokers.start(CONFIG)
    sent = [f"b{n}" for n in range(25)]
    send_durable(brokers.url, QUEUE, [Message(body=b, durable=True) for b in sent])
    if brokers.backend == "postgresql":
        slow_down_acknowledgements(store_url)
    connection = connect(brokers.url)
    receiver = connection.create_receiver(QUEUE, credit=20)
    received = [receiver.receive(timeout=15) for _ in range(20)]
    for _ in received:
        receiver.accept()  # queued locally: the dispositions and the detach leave together
    receiver.close()
    connection.close()
    brokers.kill()
    assert [body_of(m) for m in received] == sent[:20]
    brokers.start(CONFIG)
    assert [body_of(m) for m in drain_queue(brokers.url, QUEUE)] == sent[20:]
