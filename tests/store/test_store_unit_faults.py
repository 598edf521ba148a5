"""A unit the database refuses is that unit's fault, not an outage: its producer gets a
rejection with a condition at once, and every other durable send goes on (issue 12, defect 11).
Real brokers on real PostgreSQL; the refusal is real too: a 3 KB `_AMQ_DUPL_ID` is over
PostgreSQL's btree index row limit (SQLSTATE 54000), so the unit remembering it cannot commit."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.utils import SendException

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "durable", TESTS / "wire"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from durable_clients import AsyncProducer, body_of, drain_queue  # noqa: E402
from wire_helpers import connect  # noqa: E402

GIVE_UP_S = "30"  # an outage would hold every durable send this long
PROMPT_S = 5.0

DURABLE_QUEUE = """
[[address]]
name = "orders"
routing = ["anycast"]
  [[address.queue]]
  name = "orders"
  routing = "anycast"
"""


def oversized_duplicate_id() -> str:
    return os.urandom(1600).hex()  # 3,200 incompressible characters


def durable(body: str, **properties) -> Message:
    return Message(body=body, durable=True, properties=properties or None)


@pytest.fixture
def pg_broker(start_broker, pg_url):
    return start_broker(config=DURABLE_QUEUE, store=pg_url, env={"HERMOD_STORE_GIVE_UP_S": GIVE_UP_S})


def test_a_unit_postgresql_refuses_is_rejected_and_the_next_send_is_accepted_promptly(pg_broker):
    connection = connect(pg_broker.url)
    try:
        sender = connection.create_sender("orders")
        started = time.monotonic()
        with pytest.raises(SendException) as refused:
            sender.send(durable("too long an id", _AMQ_DUPL_ID=oversized_duplicate_id()))
        assert refused.value.state == Delivery.REJECTED
        assert time.monotonic() - started < PROMPT_S

        started = time.monotonic()
        sender.send(durable("fine", _AMQ_DUPL_ID="a-normal-id"))
        sender.send(durable("fine too"))
        assert time.monotonic() - started < PROMPT_S
    finally:
        connection.close()

    assert [body_of(m) for m in drain_queue(pg_broker.url, "orders")] == ["fine", "fine too"]


def test_a_refused_unit_fails_alone_in_a_batch_with_its_neighbours(pg_broker):
    messages = [(n, durable(f"m{n}")) for n in range(20)]
    messages[7] = (7, durable("m7", _AMQ_DUPL_ID=oversized_duplicate_id()))
    producer = AsyncProducer(pg_broker.url, "orders", messages, window=20)
    started = time.monotonic()
    producer.start()
    producer.join()

    assert time.monotonic() - started < PROMPT_S
    assert [key for key, _, _ in producer.refused] == [7]
    (_, outcome, description), = producer.refused
    assert outcome == "rejected" and "message not stored" in description
    assert sorted(producer.accepted) == [n for n in range(20) if n != 7]
    assert [body_of(m) for m in drain_queue(pg_broker.url, "orders")] == [
        f"m{n}" for n in range(20) if n != 7]
