"""Issue 12 in the routing core: a send that reaches no queue is refused unless the routing
rules drop it by design, and a unit the store commits after its queue went is not `accepted`."""
from __future__ import annotations

from hermod.broker.core import errors, links
from hermod.broker.core.message import ANYCAST, MULTICAST
from hermod.broker.core.postoffice import PostOffice

from test_queue_delivery import fire_timers
from test_routing import consume, msg


class HeldJournal:
    """A durable store whose units complete when the test says."""

    durable = True

    def __init__(self):
        self.units = []

    def submit(self, ops, done) -> None:
        self.units.append((ops, done))

    def complete_all(self) -> None:
        units, self.units = self.units, []
        for _ops, done in units:
            if done is not None:
                done(None)


def durable_send(po: PostOffice, address: str, body: str, rt=ANYCAST):
    outcome = []
    m = msg(body, address, rt, durable=True)
    po.post(po.route(m, address, rt), outcome.append)
    return outcome


def test_a_send_whose_anycast_queue_is_gone_is_refused():
    po = PostOffice()
    target = links.attach_producer(po, links.ProducerRequest("orders", ANYCAST))
    po.delete_queue("orders")  # e.g. a management delete
    plan = po.route(msg("x", "orders", ANYCAST), "orders", ANYCAST)
    assert po.unrouted(plan, "orders", ANYCAST) == "address orders has no anycast queue"
    po.delete_address("orders")
    assert po.unrouted(po.route(msg("x", "orders"), "orders", ANYCAST), "orders", ANYCAST) \
        == "address orders does not exist"
    links.detach_producer(po, target)


def test_a_multicast_send_with_no_subscription_is_dropped_by_design():
    po = PostOffice()
    links.attach_producer(po, links.ProducerRequest("news", MULTICAST))
    plan = po.route(msg("x", "news", MULTICAST), "news", MULTICAST)
    assert plan == [(plan[0][0], [])] and po.unrouted(plan, "news", MULTICAST) is None


def test_auto_delete_waits_for_a_sender_and_for_units_being_stored():
    journal = HeldJournal()
    po = PostOffice(journal=journal)
    c, _sink = consume(po, "jobs", ANYCAST)
    outcome = durable_send(po, "jobs", "m")
    links.detach_consumer(po, c)
    assert "jobs" in po.queues  # a message is on its way to it
    journal.complete_all()
    assert outcome == [None] and po.queues["jobs"].message_count == 1


def test_a_unit_committed_after_its_anycast_queue_was_deleted_is_refused():
    journal = HeldJournal()
    po = PostOffice(journal=journal)
    po.create_queue("jobs", "jobs", ANYCAST)
    journal.complete_all()
    outcome = durable_send(po, "jobs", "m")
    po.delete_queue("jobs")
    journal.complete_all()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.QueueNotFound)


def test_a_unit_committed_after_its_subscription_ended_is_a_drop_by_design():
    journal = HeldJournal()
    po = PostOffice(journal=journal)
    po.create_queue("news.sub", "news", MULTICAST)
    journal.complete_all()
    outcome = durable_send(po, "news", "m", rt=MULTICAST)
    po.delete_queue("news.sub")
    journal.complete_all()
    assert outcome == [None]


class Exploding:
    """An envelope whose ttl raises when read (a bug anywhere: whatever one message does)."""

    durable = False
    priority = 4
    annotations = None
    properties_count = 0
    app_properties_at = -1

    @property
    def ttl(self):
        raise RuntimeError("boom")

    def properties_of(self, encoded):
        return {}

    def application_properties_of(self, encoded):
        return {}


def _post(po, address, message):
    po.post(po.route(message, address, ANYCAST))


def test_a_dispatch_pass_loses_nothing_whatever_one_message_does():
    po = PostOffice()
    def selector(m):
        if m.encoded == b"bad":
            raise RuntimeError("selector bug")
        return m.encoded.startswith(b"take")

    c, sink = consume(po, "d", ANYCAST, credit=10, selector="k", selector_predicate=selector)
    _post(po, "d", msg("skipped", "d", ANYCAST))
    _post(po, "d", msg("bad", "d", ANYCAST))
    _post(po, "d", msg("take me", "d", ANYCAST))
    po.run_dispatch()
    q = po.queues["d"]
    assert [r.message.encoded for r in sink.got] == [b"take me"]
    assert sorted(r.message.encoded for r in q.waiting()) == [b"bad", b"skipped"]
    assert q.message_count == 3


def test_the_expiry_scan_goes_on_after_a_failing_message():
    from hermod.broker.core.message import Message
    po = PostOffice()
    po.create_queue("a", "a", ANYCAST)
    po.create_queue("b", "b", ANYCAST)
    _post(po, "a", Message(b"bad", Exploding(), "a", ANYCAST))
    _post(po, "b", msg("old", "b", ANYCAST, ttl=1))
    assert po.expire_scan() == 1
    assert po.queues["b"].message_count == 0 and po.queues["a"].message_count == 1


def test_message_groups_remembered_per_queue_are_bounded():
    from hermod.broker.core import queue as queue_module
    po = PostOffice()
    c, sink = consume(po, "g", ANYCAST, credit=10**6)
    n = queue_module.MAX_GROUPS + 500
    for i in range(n):
        m = msg(f"m{i}", "g", ANYCAST, properties={"group_id": f"group-{i}"})
        po.post(po.route(m, "g", ANYCAST))
    po.run_dispatch()
    for _ in range(n // queue_module.SCAN_BUDGET + 2):  # a pass looks at SCAN_BUDGET, then carries on
        fire_timers(po)
    q = po.queues["g"]
    assert len(sink.got) == n and len(q.groups) == queue_module.MAX_GROUPS
    assert q.groups.get(f"group-{n - 1}") is c  # the newest are kept
