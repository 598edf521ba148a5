"""Cluster mode in the core (core.ports.RemoteQueues): the post office forwards a plan's queues
another node owns and posts the rest only once every owner accepted; a refusal stores nothing
here, and the original of a dead letter stays on its queue. No sockets: the port is a stand-in
that records what it was handed (the wire tests are tests/scale/test_cluster_paths.py)."""
from __future__ import annotations

from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice

from test_routing import consume, msg


class Owners:
    """Queues named in `remote` are another node's; forwards wait for `answer`."""

    def __init__(self, *remote: str):
        self.remote = set(remote)
        self.forwarded: list[tuple[str, bytes]] = []
        self.pending = []

    def elsewhere(self, queue) -> bool:
        return queue.name in self.remote

    def forward(self, message, queue, done) -> None:
        self.forwarded.append((queue.name, message.encoded))
        self.pending.append(done)

    def answer(self, error=None) -> None:
        pending, self.pending = self.pending, []
        for done in pending:
            done(error)


def cluster_postoffice(*remote: str) -> tuple[PostOffice, Owners]:
    po = PostOffice(annotate=lambda m, extra, address, *_: Message(m.encoded, m.envelope, address))
    owners = Owners(*remote)
    po.remote = owners
    return po, owners


def test_a_remote_queue_is_forwarded_and_the_local_part_waits_for_the_owner():
    po, owners = cluster_postoffice("b")
    po.create_address("fan", {"multicast"})
    po.create_queue("a", "fan", "multicast")
    po.create_queue("b", "fan", "multicast")
    outcome = []
    m = msg("x", "fan", "multicast")
    po.post(po.route(m, "fan", "multicast"), outcome.append)
    assert owners.forwarded == [("b", b"x")]
    assert po.queues["a"].message_count == 0 and outcome == []  # nothing here before the owner
    owners.answer(None)
    assert outcome == [None]
    assert po.queues["a"].message_count == 1
    assert po.queues["b"].message_count == 0  # never held here


def test_a_refused_forward_stores_nothing_here():
    po, owners = cluster_postoffice("b")
    po.create_address("fan", {"multicast"})
    po.create_queue("a", "fan", "multicast")
    po.create_queue("b", "fan", "multicast")
    outcome = []
    po.post(po.route(msg("x", "fan", "multicast"), "fan", "multicast"), outcome.append)
    failure = RuntimeError("owner unreachable")
    owners.answer(failure)
    assert outcome == [failure]
    assert po.queues["a"].message_count == 0 and po.queues["b"].message_count == 0


def test_the_fast_paths_decline_a_plan_with_a_remote_queue():
    po, owners = cluster_postoffice("q")
    po.create_address("q", {ANYCAST})
    po.create_queue("q", "q", ANYCAST)
    plan = po.route(msg("x", "q", ANYCAST), "q", ANYCAST)
    assert po.post_now(plan) is False
    assert po.post_part(plan, None, None) is False  # type: ignore[arg-type]
    assert owners.forwarded == []


def test_a_dead_letter_to_a_remote_dla_leaves_the_original_until_the_owner_accepts():
    po, owners = cluster_postoffice("DLQ")
    po.create_address("work", {ANYCAST})
    po.create_queue("work", "work", ANYCAST)
    po.create_address("DLQ", {ANYCAST})
    po.create_queue("DLQ", "DLQ", ANYCAST)
    consumer, sink = consume(po, "work", ANYCAST)
    po.post(po.route(msg("poison", "work", ANYCAST), "work", ANYCAST))
    po.run_dispatch()
    ref = sink.got[0]
    consumer.credit = 0
    settled = []
    po.queues["work"].reject(ref, settled.append)
    assert [q for q, _ in owners.forwarded] == ["DLQ"]
    failure = RuntimeError("owner unreachable")
    owners.answer(failure)
    assert settled == [failure]  # the consumer's disposition puts it back (ConsumerLink)
    po.queues["work"].put_back(ref, acked=False)
    assert po.queues["work"].message_count == 1
    assert po.queues["DLQ"].message_count == 0


def test_outside_cluster_mode_nothing_is_asked():
    po = PostOffice()
    assert po.remote is None
    po.create_address("q", {ANYCAST})
    po.create_queue("q", "q", ANYCAST)
    assert po.post_now(po.route(msg("x", "q", ANYCAST), "q", ANYCAST))
    assert po.queues["q"].message_count == 1


def test_an_expiry_copy_refused_by_its_owner_leaves_the_message_on_its_queue():
    po, owners = cluster_postoffice("ExpiryQueue")
    po.create_address("work", {ANYCAST})
    po.create_queue("work", "work", ANYCAST)
    po.create_address("ExpiryQueue", {ANYCAST})
    po.create_queue("ExpiryQueue", "ExpiryQueue", ANYCAST)
    po.post(po.route(msg("old", "work", ANYCAST), "work", ANYCAST))
    ref = next(iter(po.queues["work"].waiting()))
    po.expire(ref)
    assert [q for q, _ in owners.forwarded] == ["ExpiryQueue"]
    owners.answer(RuntimeError("owner unreachable"))
    assert po.queues["work"].message_count == 1  # back, as it still is in the store
    assert po.queues["ExpiryQueue"].message_count == 0
    po.expire(next(iter(po.queues["work"].waiting())))
    owners.answer(None)
    assert po.queues["work"].message_count == 0
