"""The crash storm: mixed durable traffic while the broker is SIGKILLed again and again on one
store, with a ledger that checks the delivery promise after every restart and at the end.

Traffic (STORM_CONFIG): a durable queue, a durable subscription on a multicast address, a
transactional producer (batches committed with local transactions), a non-exclusive divert (each
message on the original queue and on the copy's), a virtual topic with one consumer group, and a
queue whose consumer rejects everything (max_delivery_attempts = 1) into its dead-letter queue,
which has a consumer of its own.

Every producer is at-least-once: a message counts as accepted only from the broker's outcome
(for the transactional one: from the commit's), and what was never confirmed is sent again after
the restart. Every consumer acknowledges (accepts, or rejects on the poison queue) without
settling and counts a message as acknowledged only when the broker settles it
(durable_clients.AckingConsumer). The promise checked:
- nothing accepted is lost: each message accepted to a source reaches every sink it feeds
  (the dead-letter sink: each message whose rejection the broker confirmed);
- nothing acknowledged is redelivered: after each restart no sink receives a copy (seq and the
  round it was sent in) again once its acknowledgement was confirmed;
- duplicates only from what was in doubt: a key arrives at most 1 + (unconfirmed sends of it) +
  (unconfirmed acknowledgements of it, here and upstream) times.

Used by tests/durable/test_crash_storm.py (a few kills) and benchmarks/crash_storm.py (many).
The `brokers` may be one broker (durable_clients.DurableBrokers) or a topology of several
(storm_topologies.py: two cluster nodes, a bridged pair): producers use its `producer_url`,
consumers its `consumer_url`, and `settled()` says when what is in transit between its brokers
arrived; `streams` and `config` replace the traffic and the brokers' configuration.
"""
from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from proton import Delivery, Message
from proton.handlers import TransactionHandler
from proton.reactor import DurableSubscription

from durable_clients import AckingConsumer, AsyncProducer, _ThreadClient, queue_stats, wait_until

STORM_CONFIG = """
[[address]]
name = "storm.orders"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.orders"
  routing = "anycast"
  durable = true

[[address]]
name = "storm.news"
routing = ["multicast"]

[[address]]
name = "storm.tx"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.tx"
  routing = "anycast"
  durable = true

[[address]]
name = "storm.prices"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.prices"
  routing = "anycast"
  durable = true

[[address]]
name = "storm.prices.copy"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.prices.copy"
  routing = "anycast"
  durable = true

[[divert]]
name = "storm-prices-copy"
address = "storm.prices"
forwarding_address = "storm.prices.copy"
exclusive = false
routing_type = "anycast"

[[address]]
name = "storm.poison"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.poison"
  routing = "anycast"
  durable = true

[[address]]
name = "storm.DLQ"
routing = ["anycast"]
  [[address.queue]]
  name = "storm.DLQ"
  routing = "anycast"
  durable = true

[[address_settings]]
match = "storm.poison"
dead_letter_address = "storm.DLQ"
max_delivery_attempts = 1

[[virtual_topic]]
name = "VirtualTopic.>"
prefix = "Consumer.*."
"""

SUBSCRIBER_ID = "storm-subscriber"
SUBSCRIPTION = "storm-sub"
VT_QUEUE = "Consumer.A.VirtualTopic.Storm"
WINDOW = 16


def storm_message(source: str, seq: int, round_: int) -> Message:
    return Message(id=f"{source}-{seq}-r{round_}", body=f"{source} {seq}", durable=True,
                   properties={"src": source, "seq": seq, "round": round_})


def copy_of(message: Message) -> tuple[int, int]:
    """A message's identity at a sink: (seq, round). A resend (a later round) is another copy of
    the same seq, so an acknowledged copy coming back is told from a duplicate resend."""
    return message.properties["seq"], message.properties["round"]


def per_seq(copies) -> Counter:
    """Counts by seq of (seq, round) copies (a Counter's counts, or 1 each for a set)."""
    out: Counter = Counter()
    items = copies.items() if isinstance(copies, Counter) else ((c, 1) for c in copies)
    for (seq, _round), n in items:
        out[seq] += n
    return out


class TxProducer(_ThreadClient, TransactionHandler):
    """Sends its messages in local transactions of `batch`; a message is accepted once its
    transaction's commit is. `in_doubt`: the batch whose commit outcome was not seen."""

    def __init__(self, url: str, address: str, messages: list[tuple[Any, Message]], batch: int = 8):
        super().__init__(url, auto_settle=True)
        self.address = address
        self.messages = list(messages)
        self.batch = batch
        self.sent: list = []
        self.accepted: list = []
        self.refused: list = []
        self._current: list = []
        self._next = 0
        self._txn = None
        self._committing = False
        self.sender = None

    def open_link(self, container, connection) -> None:
        self.sender = container.create_sender(connection, self.address)
        self._declare()

    def _declare(self) -> None:
        if self._next < len(self.messages):
            self._container.declare_transaction(self.connection, handler=self)
        else:
            self.finish()

    def on_transaction_declared(self, event) -> None:
        self._txn = event.transaction
        self._committing = False
        self._fill()

    def on_sendable(self, _event) -> None:
        self._fill()

    def _fill(self) -> None:
        if self._txn is None or self._committing or self._stopping or self.disconnected:
            return
        while self.sender.credit > 0 and len(self._current) < self.batch and self._next < len(self.messages):
            key, message = self.messages[self._next]
            self._next += 1
            self._txn.send(self.sender, message)
            self._current.append(key)
            self.sent.append(key)
        if self._current and (len(self._current) >= self.batch or self._next >= len(self.messages)):
            self._committing = True
            self._txn.commit()

    def on_transaction_committed(self, _event) -> None:
        self.accepted.extend(self._current)
        self._counted(len(self.accepted))
        self._current = []
        self._txn = None
        self._declare()

    def on_transaction_commit_failed(self, _event) -> None:
        self.refused.extend((key, "commit failed", None) for key in self._current)
        self._current = []
        self._txn = None
        self._declare()

    def on_transaction_declare_failed(self, event) -> None:
        self.errors.append(f"declare failed: {event.delivery.remote_state}")
        self.finish()

    @property
    def in_doubt(self) -> list:
        return list(self._current)


@dataclass
class Source:
    name: str
    address: str
    transactional: bool = False
    next_seq: int = 0
    accepted: set = field(default_factory=set)
    unconfirmed: dict = field(default_factory=dict)  # seq -> None, in sending order
    in_doubt: Counter = field(default_factory=Counter)  # seq -> sends with no outcome seen
    sent: int = 0
    refused: int = 0


@dataclass
class Sink:
    name: str
    address: str
    queue_address: str  # the address its queue is on (management's `address` column)
    feeds_from: str  # a source name, or "sink:<name>" for the dead-letter sink
    outcome: int = Delivery.ACCEPTED
    durable_subscription: bool = False
    acked: set = field(default_factory=set)  # (seq, round) copies
    received: Counter = field(default_factory=Counter)  # (seq, round) -> deliveries
    in_doubt: Counter = field(default_factory=Counter)  # (seq, round) -> acks not confirmed
    redelivered_after_ack: list = field(default_factory=list)


def default_streams() -> tuple[list[Source], list[Sink]]:
    sources = [Source("orders", "storm.orders"), Source("news", "topic://storm.news"),
               Source("tx", "storm.tx", transactional=True), Source("prices", "storm.prices"),
               Source("vt", "VirtualTopic.Storm"), Source("poison", "storm.poison")]
    sinks = [Sink("orders", "storm.orders", "storm.orders", "orders"),
             Sink("subscription", "topic://storm.news", "storm.news", "news", durable_subscription=True),
             Sink("tx", "storm.tx", "storm.tx", "tx"),
             Sink("prices", "storm.prices", "storm.prices", "prices"),
             Sink("prices.copy", "storm.prices.copy", "storm.prices.copy", "prices"),
             Sink("vt", VT_QUEUE, "VirtualTopic.Storm", "vt"),
             Sink("poison", "storm.poison", "storm.poison", "poison", outcome=Delivery.REJECTED),
             Sink("dead-letters", "storm.DLQ", "storm.DLQ", "sink:poison")]
    return sources, sinks


class Storm:
    """Rounds of traffic on `brokers` (durable_clients.DurableBrokers), each ended by a SIGKILL
    at a drawn point, then a final round that drains everything; `report()` has the figures."""

    def __init__(self, brokers, seed: Any, batch: int = 40, log=None, streams=None,
                 config: str = STORM_CONFIG):
        self.brokers = brokers
        self.rng = random.Random(f"{seed}-{brokers.backend}")
        self.where = f"(seed {seed}, {brokers.backend})"
        self.batch = batch
        self.log = log or (lambda _line: None)
        self.config = config
        self.sources, self.sinks = streams if streams is not None else default_streams()
        self.by_source = {s.name: s for s in self.sources}
        self.by_sink = {s.name: s for s in self.sinks}
        self.rounds = 0
        self.kills = 0
        self.started = False

    # -- one round ------------------------------------------------------------------------------
    def _consumer(self, sink: Sink) -> AckingConsumer:
        options = [DurableSubscription()] if sink.durable_subscription else None
        return AckingConsumer(self._consumer_url, sink.address, key=copy_of, prefetch=WINDOW,
                              outcome=sink.outcome,
                              link_name=SUBSCRIPTION if sink.durable_subscription else None,
                              link_options=options,
                              container_id=SUBSCRIBER_ID if sink.durable_subscription else None)

    def _producer(self, source: Source, final: bool):
        seqs = list(source.unconfirmed)
        if not final:
            seqs += range(source.next_seq, source.next_seq + self.batch)
            source.next_seq += self.batch
        source.unconfirmed.update((s, None) for s in seqs)
        messages = [(s, storm_message(source.name, s, self.rounds)) for s in seqs]
        if not messages:
            return None  # nothing to send (an AsyncProducer with nothing would never finish)
        if source.transactional:
            return TxProducer(self._producer_url, source.address, messages)
        return AsyncProducer(self._producer_url, source.address, messages, window=WINDOW)

    @property
    def _producer_url(self) -> str:
        return getattr(self.brokers, "producer_url", None) or self.brokers.url

    @property
    def _consumer_url(self) -> str:
        return getattr(self.brokers, "consumer_url", None) or self.brokers.url

    def _knows_the_subscriptions(self, url: str) -> bool:
        stats = queue_stats(url)
        names = {sink.address for sink in self.sinks}
        return ((VT_QUEUE not in names or VT_QUEUE in stats)
                and (not any(sink.durable_subscription for sink in self.sinks)
                     or any(row["address"] == "storm.news" for row in stats.values())))

    def run_round(self, kill: bool) -> None:
        if self.brokers.current is None or not self.brokers.running:
            self.brokers.start(self.config)
        consumers = {sink.name: self._consumer(sink).start() for sink in self.sinks}
        if not self.started:
            # Producers start once the subscription and the virtual-topic queue exist: before,
            # a multicast send is dropped by design.
            # Where producers send to another node (cluster mode), that node must know them too.
            wait_until(lambda: all(self._knows_the_subscriptions(url)
                                   for url in {self._consumer_url, self._producer_url}),
                       f"the subscription and the virtual-topic queue {self.where}")
            self.started = True
        producers = {source.name: producer for source in self.sources
                     if (producer := self._producer(source, final=not kill)) is not None}
        # The kill comes from one producer's own thread the moment it has counted a drawn number
        # of accepts: mid-stream for it, wherever the others are.
        trigger = self.rng.choice(sorted(producers)) if kill else None
        for name, producer in producers.items():
            if name == trigger:
                producer.start(then=self.brokers.kill,
                               after=self.rng.randrange(1, max(2, len(producer.messages))))
            else:
                producer.start()
        if kill:
            wait_until(lambda: not self.brokers.running or producers[trigger].done.is_set(),
                       f"the kill: {self._states(producers, consumers)} {self.where}", timeout=60)
            if self.brokers.running:  # the trigger ended early (e.g. refused): kill here
                self.brokers.kill()
            self.kills += 1
            for consumer in consumers.values():  # those on a broker that lives on (topologies)
                consumer.stop()
            for client in [*producers.values(), *consumers.values()]:
                client.join(30)
        else:
            for p in producers.values():
                p.join(120)
            url = self._consumer_url
            sink_addresses = {sink.queue_address for sink in self.sinks}
            settled = getattr(self.brokers, "settled", lambda: True)
            wait_until(lambda: settled() and all(row["messages"] == 0 for row in queue_stats(url).values()
                                                 if row["address"] in sink_addresses)
                       and not any(c.in_doubt for c in consumers.values()),
                       f"every sink drained and acknowledged {self.where}", timeout=120)
            for c in consumers.values():
                c.stop()
                c.join(30)
        self.rounds += 1
        self._record(producers, consumers)
        self.log(f"round {self.rounds} {'killed' if kill else 'final'} {self.where}: "
                 f"accepted {sum(len(s.accepted) for s in self.sources)}, "
                 f"acked {sum(len(s.acked) for s in self.sinks)}")

    @staticmethod
    def _states(producers: dict, consumers: dict) -> str:
        """What each client did so far (for a timeout's message)."""
        return "; ".join([f"{n} sent {len(p.sent)} accepted {len(p.accepted)} refused {p.refused[:3]} "
                          f"in doubt {len(p.in_doubt)} errors {p.errors}" for n, p in producers.items()]
                         + [f"{n} received {len(c.received)} acked {len(c.acked)} errors {c.errors}"
                            for n, c in consumers.items()])

    def _record(self, producers: dict, consumers: dict) -> None:
        for source in self.sources:
            p = producers.get(source.name)
            if p is None:
                continue
            assert not p.errors, f"{source.name}: {p.errors} {self.where}"
            source.sent += len(p.sent)
            source.refused += len(p.refused)
            for key in p.accepted:
                source.accepted.add(key)
                source.unconfirmed.pop(key, None)
            source.in_doubt.update(p.in_doubt)
        for sink in self.sinks:
            c = consumers[sink.name]
            assert not c.errors, f"{sink.name}: {c.errors} {self.where}"
            again = sorted(set(c.received) & sink.acked)
            sink.redelivered_after_ack.extend(again)
            sink.received.update(c.received)
            sink.acked.update(c.acked)
            sink.in_doubt.update(c.in_doubt)

    def run(self, kills: int, until: float | None = None) -> dict:
        """`kills` rounds ended by a kill, then the final round; with `until` (a time.time()),
        no kill round starts after it (the report says how many there were)."""
        for _ in range(kills):
            if until is not None and time.time() >= until:
                break
            self.run_round(kill=True)
        self.run_round(kill=False)
        report = self.report()
        assert self.brokers.stop() == 0, self.where
        return report

    # -- the verdict ----------------------------------------------------------------------------
    def _upstream(self, sink: Sink) -> tuple[set, Counter]:
        """Keys that must reach `sink`, and per key the in-doubt count upstream of it."""
        if sink.feeds_from.startswith("sink:"):
            feeder = self.by_sink[sink.feeds_from.removeprefix("sink:")]
            source = self.by_source[feeder.feeds_from]
            return set(per_seq(feeder.acked)), per_seq(feeder.in_doubt) + source.in_doubt
        source = self.by_source[sink.feeds_from]
        return set(source.accepted), source.in_doubt

    def report(self) -> dict:
        losses: dict[str, list] = {}
        duplicates: dict[str, dict] = {}
        redelivered: dict[str, list] = {}
        for sink in self.sinks:
            must, upstream_doubt = self._upstream(sink)
            lost = sorted(must - set(per_seq(sink.acked)) - set(per_seq(sink.in_doubt)))
            if lost:
                losses[sink.name] = lost
            own_doubt = per_seq(sink.in_doubt)
            beyond = {k: n for k, n in per_seq(sink.received).items()
                      if n > 1 + upstream_doubt[k] + own_doubt[k]}
            if beyond:
                duplicates[sink.name] = beyond
            if sink.redelivered_after_ack:
                redelivered[sink.name] = sink.redelivered_after_ack
        return {
            "backend": self.brokers.backend,
            "rounds": self.rounds,
            "kills": self.kills,
            "sent": sum(s.sent for s in self.sources),
            "accepted": sum(len(s.accepted) for s in self.sources),
            "acknowledged": sum(len(s.acked) for s in self.sinks),
            "received": sum(sum(s.received.values()) for s in self.sinks),
            "in_doubt_sends": sum(sum(s.in_doubt.values()) for s in self.sources),
            "in_doubt_acks": sum(sum(s.in_doubt.values()) for s in self.sinks),
            "refused": sum(s.refused for s in self.sources),
            "duplicates": sum(n - 1 for sink in self.sinks for n in per_seq(sink.received).values() if n > 1),
            "losses": losses,
            "redelivered_after_ack": redelivered,
            "duplicates_beyond_in_doubt": duplicates,
        }


def format_report(report: dict) -> str:
    counts = {k: (sum(len(v) for v in report[k].values())) for k in
              ("losses", "redelivered_after_ack", "duplicates_beyond_in_doubt")}
    return (f"{report['backend']}: rounds={report['rounds']} kills={report['kills']} "
            f"sent={report['sent']} accepted={report['accepted']} acknowledged={report['acknowledged']} "
            f"received={report['received']} in_doubt_sends={report['in_doubt_sends']} "
            f"in_doubt_acks={report['in_doubt_acks']} refused={report['refused']} "
            f"duplicates={report.get('duplicates', 0)} "
            f"lost={counts['losses']} acked_redelivered={counts['redelivered_after_ack']} "
            f"duplicates_beyond_in_doubt={counts['duplicates_beyond_in_doubt']}")
