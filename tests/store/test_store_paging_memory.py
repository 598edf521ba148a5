"""Paging in respects the memory limit (issue 12, defects 9 and 14): a consumer with credit
2^32-1 that never settles cannot page a whole durable queue into memory and so block every
producer of the broker; what a queue holds in memory (out with consumers included) is bounded."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from proton import Message, Timeout

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "durable", TESTS / "wire"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from durable_clients import AsyncProducer, queue_stats  # noqa: E402
from hermod_testing import wait_for  # noqa: E402
from wire_helpers import connect  # noqa: E402

from hermod.broker.core.queue import PAGE_WINDOW  # noqa: E402

CONFIG = """
[[address]]
name = "deep"
routing = ["anycast"]
  [[address.queue]]
  name = "deep"
  routing = "anycast"

[[address]]
name = "other"
routing = ["anycast"]
  [[address.queue]]
  name = "other"
  routing = "anycast"

[[address_settings]]
match = "deep"
max_size_bytes = 100000
address_full_policy = "page"
"""
MESSAGES = 6000
BODY = 1000


def test_a_greedy_consumer_that_never_settles_does_not_block_other_producers(start_broker, tmp_path):
    url_store = f"sqlite:///{tmp_path / 'hermod.db'}"
    broker = start_broker(config="[server]\nmax_memory_mb = 4\n" + CONFIG, store=url_store)
    producer = AsyncProducer(broker.url, "deep", [(n, Message(body=os.urandom(BODY), durable=True))
                                                   for n in range(MESSAGES)], window=200)
    producer.start()
    producer.join(timeout=120)
    assert len(producer.accepted) == MESSAGES  # 6 MB: paged into the store, not memory

    greedy = connect(broker.url)
    bystander = connect(broker.url)
    try:
        receiver = greedy.create_receiver("deep", credit=0)
        receiver.link.flow(2 ** 31 - 1)  # endless credit (Proton caps a flow at int32); settles nothing
        got = 0
        while True:
            try:
                receiver.receive(timeout=2)  # held, never settled
            except Timeout:  # the broker stopped sending
                break
            got += 1
        # Bounded by the queue's paging window (what it holds in memory, out with consumers
        # included), not by the consumer's credit.
        assert got <= PAGE_WINDOW
        # Another producer is not blocked: the broker is within its memory limit.
        sender = bystander.create_sender("other")
        for n in range(5):
            sender.send(Message(body=f"bystander {n}", durable=True), timeout=10)
        assert wait_for(lambda: queue_stats(broker.url)["other"]["messages"] == 5)
    finally:
        bystander.close()
        greedy.close()
