"""The routing core driven directly: no sockets, no Proton, milliseconds."""
from __future__ import annotations

import pytest

from hermod.broker.core import errors, links
from hermod.broker.core.message import ANYCAST, MULTICAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.settings import SettingsRepository
from hermod.broker.core.wildcards import matches, specificity


class Envelope:
    """What the protocol adapter's codec provides, as plain fields."""

    def __init__(self, durable=False, priority=4, ttl=0, properties=None, application_properties=None):
        self.durable = durable
        self.priority = priority
        self.ttl = ttl
        self.annotations = None
        self._properties = properties or {}
        self._app = application_properties or {}
        self.properties_count = 13 if self._properties else 0
        self.app_properties_at = 0 if self._app else -1

    def properties_of(self, encoded):
        return self._properties

    def application_properties_of(self, encoded):
        return self._app


class Sink:
    """The adapter side of a consumer: records what the queue sends."""

    def __init__(self):
        self.got = []

    def send(self, consumer, ref):
        self.got.append(ref)

    def queue_deleted(self, consumer):
        self.got.append("deleted")


def msg(body: str, address: str = "a", rt=None, **env) -> Message:
    return Message(body.encode(), Envelope(**env), address, rt)


def consume(po: PostOffice, address: str, rt=None, credit: int = 100, **kw):
    sink = Sink()
    c = links.attach_consumer(po, links.ConsumerRequest(address, rt, **kw), sink)
    c.credit = credit
    return c, sink


def send(po: PostOffice, address: str, *bodies: str, rt=None) -> None:
    for b in bodies:
        m = msg(b, address, rt)
        po.post(po.route(m, address, rt))
    po.run_dispatch()


def bodies(sink: Sink) -> list[str]:
    return [r.message.encoded.decode() for r in sink.got]


@pytest.fixture
def po():
    return PostOffice()


# -- wildcards and settings ---------------------------------------------------------------------


@pytest.mark.parametrize("pattern, address, expected", [
    ("news.#", "news", True), ("news.#", "news.eu", True), ("news.#", "news.eu.sport", True),
    ("news.*", "news.eu", True), ("news.*", "news", False), ("news.*", "news.eu.sport", False),
    ("a.#.d", "a.d", True), ("a.#.d", "a.b.c.d", True), ("a.#.d", "a.b.c", False),
    ("#.b.#", "x.b.y", True), ("#.b.#", "b", True), ("#.b.#", "x.y", False),
    ("news.>", "news.eu.sport", True), ("a.b*", "a.bc", False), ("a.b*", "a.b*", True),
    ("#", "anything.at.all", True), ("*", "one", True), ("*", "one.two", False),
])
def test_wildcard_matching(pattern, address, expected):
    assert matches(pattern, address) is expected


def test_more_specific_patterns_sort_later():
    ordered = sorted(["#", "orders.#", "orders.*", "orders.eu"], key=specificity)
    assert ordered == ["#", "orders.#", "orders.*", "orders.eu"]


def test_settings_merge_most_specific_wins_per_key():
    repo = SettingsRepository([
        ("#", {"max_delivery_attempts": 5, "dead_letter_address": "DLQ"}),
        ("orders.#", {"max_delivery_attempts": 2}),
        ("orders.eu", {"dead_letter_address": "EU.DLQ"}),
    ])
    eu = repo.for_address("orders.eu")
    assert (eu.max_delivery_attempts, eu.dead_letter_address) == (2, "EU.DLQ")
    other = repo.for_address("news")
    assert (other.max_delivery_attempts, other.dead_letter_address) == (5, "DLQ")
    assert other.default_routing_type == "anycast"  # Hermod's default, not Artemis's


# -- routing ------------------------------------------------------------------------------------


def test_anycast_queues_of_an_address_take_turns(po):
    po.create_queue("q1", "a", ANYCAST)
    po.create_queue("q2", "a", ANYCAST)
    send(po, "a", "1", "2", "3", "4")
    assert [r.message.encoded for r in po.queues["q1"].waiting()] == [b"1", b"3"]
    assert [r.message.encoded for r in po.queues["q2"].waiting()] == [b"2", b"4"]


def test_every_multicast_queue_gets_a_copy_sharing_one_message(po):
    po.create_queue("s1", "t", MULTICAST)
    po.create_queue("s2", "t", MULTICAST)
    send(po, "t", "x", rt=MULTICAST)
    r1, r2 = po.queues["s1"].waiting()[0], po.queues["s2"].waiting()[0]
    assert r1.message is r2.message and r1 is not r2


def test_message_without_routing_type_reaches_both_kinds(po):
    po.create_queue("any", "both", ANYCAST)
    po.create_queue("sub", "both", MULTICAST)
    send(po, "both", "x")
    assert len(po.queues["any"].waiting()) == len(po.queues["sub"].waiting()) == 1
    send(po, "both", "y", rt=ANYCAST)
    assert (len(po.queues["any"].waiting()), len(po.queues["sub"].waiting())) == (2, 1)


def test_fqqn_route_reaches_only_that_queue(po):
    po.create_queue("q1", "a", MULTICAST)
    po.create_queue("q2", "a", MULTICAST)
    m = msg("x")
    assert [[q.name for q in qs] for _, qs in po.route(m, "a", None, "q2")] == [["q2"]]


def test_queue_filter_keeps_out_non_matching_messages(po):
    q = po.create_queue("big", "a", ANYCAST, filter=lambda m: m.priority > 5)
    for p in (1, 9):
        m = msg(str(p), priority=p)
        po.post(po.route(m, "a", None))
    assert [r.message.priority for r in q.waiting()] == [9]


# -- dispatch -----------------------------------------------------------------------------------


def test_round_robin_between_consumers_with_credit(po):
    c1, s1 = consume(po, "w")
    c2, s2 = consume(po, "w")
    send(po, "w", "1", "2", "3", "4")
    assert (bodies(s1), bodies(s2)) == (["1", "3"], ["2", "4"])


def test_consumer_without_credit_is_skipped(po):
    c1, s1 = consume(po, "w", credit=1)
    c2, s2 = consume(po, "w", credit=10)
    send(po, "w", "1", "2", "3")
    assert (bodies(s1), bodies(s2)) == (["1"], ["2", "3"])


def test_consumer_selector_filters_only_that_consumer(po):
    c1, s1 = consume(po, "w", selector_predicate=lambda m: m.encoded.startswith(b"x"), selector="x")
    send(po, "w", "a1")
    assert bodies(s1) == []
    c2, s2 = consume(po, "w")
    po.run_dispatch()
    send(po, "w", "x1")
    assert bodies(s2) == ["a1"] and bodies(s1) == ["x1"]


def test_acknowledged_messages_leave_and_are_counted(po):
    c, s = consume(po, "w")
    send(po, "w", "1")
    q = c.queue
    assert q.message_count == 1 and q.delivering == 1
    q.acknowledge(s.got[0])
    assert (q.message_count, q.acked, q.added) == (0, 1, 1)


def test_release_returns_to_the_head_without_counting(po):
    c, s = consume(po, "w", credit=1)
    send(po, "w", "1", "2")
    ref = s.got[0]
    assert ref.delivery_count == 1
    c.queue.release(ref)
    assert ref.delivery_count == 0
    c.credit = 1
    po.run_dispatch()
    assert bodies(s) == ["1", "1"]


def test_failed_deliveries_reach_max_attempts_then_dead_letter(po):
    po.settings = SettingsRepository([("#", {"max_delivery_attempts": 2})])
    c, s = consume(po, "w", credit=10)
    send(po, "w", "poison")
    po.annotate = lambda m, extra, address, clear=False: Message(m.encoded, m.envelope, address)
    c.queue.release(s.got[-1], failed=True)
    po.run_dispatch()
    c.queue.release(s.got[-1], failed=True)
    assert len(s.got) == 2
    assert [r.message.encoded for r in po.queues["DLQ"].waiting()] == [b"poison"]


def test_consumer_leaving_returns_its_messages_in_order(po):
    c, s = consume(po, "w", credit=3)
    send(po, "w", "1", "2", "3", "4")
    c.queue.remove_consumer(c)
    assert [r.message.encoded for r in c.queue.waiting()] == [b"1", b"2", b"3", b"4"]
    assert all(r.delivery_count == 0 for r in c.queue.waiting())


def test_browser_sees_a_snapshot_and_takes_nothing(po):
    po.create_queue("b", "b", ANYCAST)
    send(po, "b", "1", "2")
    c, s = consume(po, "b", browser=True)
    po.schedule(c.queue)
    po.run_dispatch()
    send(po, "b", "3")
    assert bodies(s) == ["1", "2"]
    assert len(c.queue.waiting()) == 3


# -- attach rules ----------------------------------------------------------------------------------


def test_producer_attach_auto_creates_anycast_queue(po):
    target = links.attach_producer(po, links.ProducerRequest("orders"))
    assert target.attach_routing_type == ANYCAST
    assert po.queues["orders"].routing_type == ANYCAST


def test_multicast_producer_creates_only_the_address(po):
    links.attach_producer(po, links.ProducerRequest("news", MULTICAST))
    assert po.addresses["news"].routing_types == {MULTICAST} and not po.queues


def test_auto_create_off_refuses_unknown_addresses(po):
    po.settings = SettingsRepository([("#", {"auto_create_addresses": False})])
    with pytest.raises(errors.AddressNotFound):
        links.attach_producer(po, links.ProducerRequest("nowhere"))
    with pytest.raises(errors.AddressNotFound):
        links.attach_consumer(po, links.ConsumerRequest("nowhere"), Sink())


def test_topic_on_anycast_only_address_is_a_routing_type_mismatch(po):
    po.create_queue("q", "q", ANYCAST)
    with pytest.raises(errors.RoutingTypeMismatch):
        links.attach_consumer(po, links.ConsumerRequest("q", MULTICAST), Sink())


def test_max_consumers_is_enforced(po):
    po.create_queue("solo", "solo", ANYCAST, max_consumers=1)
    consume(po, "solo")
    with pytest.raises(errors.ResourceLimitExceeded):
        consume(po, "solo")


def test_durable_subscription_survives_detach_and_goes_on_close(po):
    req = dict(subscription_queue="cid.sub", durable=True)
    c, _ = consume(po, "t", MULTICAST, **req)
    links.detach_consumer(po, c)
    assert "cid.sub" in po.queues
    c, _ = consume(po, "t", MULTICAST, **req)
    links.detach_consumer(po, c, unsubscribe=True)
    assert "cid.sub" not in po.queues


def test_durable_subscription_in_use_cannot_change_selector(po):
    consume(po, "t", MULTICAST, subscription_queue="cid.sub", durable=True, shared=True)
    with pytest.raises(errors.IllegalState):
        consume(po, "t", MULTICAST, subscription_queue="cid.sub", durable=True, shared=True,
                selector="a = 1", selector_predicate=lambda m: True)


def test_dynamic_source_is_temporary(po):
    c, _ = consume(po, "", dynamic=True)
    name = c.queue.name
    assert c.queue.temporary and not c.queue.durable
    links.detach_consumer(po, c)
    assert name not in po.queues
