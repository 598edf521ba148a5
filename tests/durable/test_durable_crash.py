"""SIGKILL the broker at random points while durable messages are sent and while they are
consumed, restart it on the same store, and check the promise: every message whose `accepted`
the producer saw is delivered, no message whose acknowledgement the broker confirmed comes back,
and nothing is duplicated beyond redelivery of what was in doubt. On both back-ends.

Kill points are drawn from a seeded generator (`HERMOD_CRASH_SEED` overrides the seed, which
every failure message shows). "In doubt" (see durable_clients): a transfer the producer sent
with no outcome seen, or an ack the consumer sent with no settlement from the broker seen.

The client kills the broker from its own thread the moment it has counted the drawn number of
outcomes; outcomes the broker had already written before it died are still read and counted
afterwards (they are real), so a kill can land after the last of them: acknowledgements are not
limited by credit, and tens of confirmations can be on the wire at any moment.
"""
from __future__ import annotations

import os
import random
from collections import Counter

from proton import Message

from durable_clients import AckingConsumer, AsyncProducer, StoreView, drain_queue

N = 300
WINDOW = 32  # unsettled transfers a producer keeps, and a consumer's credit
CRASH_ROUNDS = 2
SEED = int(os.environ.get("HERMOD_CRASH_SEED", "3"))
QUEUE = "crash.orders"
CONFIG = f"""
[[address]]
name = "{QUEUE}"
routing = ["anycast"]

[[address.queue]]
name = "{QUEUE}"
routing = "anycast"
durable = true
"""


def durable_message(seq: int, round_: int) -> Message:
    # Unique per send: a resent message is told apart from its first copy.
    return Message(id=f"m{seq}-r{round_}", body=f"message {seq}", durable=True,
                   properties={"seq": seq, "round": round_})


def key_of(message: Message) -> tuple[int, int]:
    return message.properties["round"], message.properties["seq"]


def kill_point(rng: random.Random, remaining: int) -> int:
    """How many outcomes to see before the kill: somewhere in the first half of what the
    client still has to do, so the kill comes while it is busy sending or acknowledging."""
    return rng.randrange(max(1, remaining // 10), max(2, remaining // 2))


def fill(url: str, seqs, round_: int = 0) -> None:
    producer = AsyncProducer(url, QUEUE, [(s, durable_message(s, round_)) for s in seqs]).start()
    producer.join()
    assert not producer.errors and not producer.refused
    assert sorted(producer.accepted) == sorted(seqs)


def test_sigkill_while_sending_loses_no_accepted_message(brokers):
    rng = random.Random(f"{SEED}-send-{brokers.backend}")
    where = f"(seed {SEED}, {brokers.backend})"
    brokers.start(CONFIG)
    accepted: set[int] = set()
    in_doubt = Counter()  # seq -> sends that got no outcome before a kill
    for round_ in range(CRASH_ROUNDS):
        pending = [s for s in range(N) if s not in accepted]
        target = kill_point(rng, len(pending))
        producer = AsyncProducer(brokers.url, QUEUE,
                                 [(s, durable_message(s, round_)) for s in pending], window=WINDOW)
        producer.start(then=brokers.kill, after=target)
        producer.join()
        assert not brokers.running, (f"no kill: {len(producer.accepted)} accepts, "
                                     f"{len(producer.sent)} sent, {producer.errors} {where}")
        assert not producer.refused, where
        assert producer.triggered_at is not None, where
        accepted.update(producer.accepted)
        in_doubt.update(producer.in_doubt)
        brokers.start(CONFIG)

    # The producer retries what it never saw accepted (at-least-once), this time to the end.
    final_round = CRASH_ROUNDS
    fill(brokers.url, [s for s in range(N) if s not in accepted], final_round)

    delivered = [key_of(m) for m in drain_queue(brokers.url, QUEUE)]
    copies = Counter(seq for _, seq in delivered)
    assert set(copies) == set(range(N)), f"lost: {sorted(set(range(N)) - set(copies))} {where}"
    duplicated = {s: n for s, n in copies.items() if n > 1 + in_doubt[s]}
    assert not duplicated, f"copies beyond the in-doubt resends: {duplicated} {where}"
    # Arrival order survives the restarts: by round, then in sending order.
    assert delivered == sorted(delivered), where
    assert len(delivered) == len(set(delivered)), where

    assert brokers.stop() == 0
    with StoreView(brokers.store_url) as store:
        assert store.message_count() == 0, where
        assert store.refs_of(QUEUE) == [], where


def test_sigkill_while_consuming_brings_back_no_acknowledged_message(brokers):
    rng = random.Random(f"{SEED}-consume-{brokers.backend}")
    where = f"(seed {SEED}, {brokers.backend})"
    brokers.start(CONFIG)
    fill(brokers.url, range(N))

    def seq_of(message: Message) -> int:
        return message.properties["seq"]

    acked: set[int] = set()  # acknowledgements the broker confirmed by settling
    received = Counter()
    in_doubt = Counter()
    for round_ in range(CRASH_ROUNDS):
        remaining = N - len(acked)
        target = kill_point(rng, remaining)
        consumer = AckingConsumer(brokers.url, QUEUE, key=seq_of, prefetch=WINDOW)
        consumer.start(then=brokers.kill, after=target)
        consumer.join()
        assert not brokers.running, (f"no kill: {len(consumer.acked)} acks, "
                                     f"{len(consumer.received)} received, {consumer.errors} {where}")
        assert not consumer.errors, where
        assert consumer.triggered_at is not None, where
        came_back = set(consumer.received) & acked
        assert not came_back, f"acknowledged messages delivered again: {sorted(came_back)} {where}"
        assert len(consumer.received) == len(set(consumer.received)), where
        # Within one run of the broker, messages come in queue order.
        assert consumer.received == sorted(consumer.received), where
        acked.update(consumer.acked)
        received.update(consumer.received)
        in_doubt.update(consumer.in_doubt)
        brokers.start(CONFIG)

    rest = [seq_of(m) for m in drain_queue(brokers.url, QUEUE)]
    assert len(rest) == len(set(rest)), where
    assert not set(rest) & acked, f"acknowledged messages came back: {sorted(set(rest) & acked)} {where}"
    never_received = set(range(N)) - set(received)
    assert never_received <= set(rest), f"lost: {sorted(never_received - set(rest))} {where}"
    # Nothing beyond what was in doubt came twice: a message is received again only after a
    # kill left its acknowledgement unconfirmed.
    total = received + Counter(rest)
    beyond = {s: n for s, n in total.items() if n > 1 + in_doubt[s]}
    assert not beyond, f"delivered more often than in-doubt acks allow: {beyond} {where}"
    # What is neither acknowledged-and-confirmed nor delivered now was an in-doubt ack that
    # the broker had committed before it died.
    gone = set(range(N)) - acked - set(rest)
    assert gone <= set(in_doubt), where
    assert rest == sorted(rest), where
