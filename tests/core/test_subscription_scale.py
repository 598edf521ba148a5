"""Binding subscriptions costs what it binds, not what is already there (issue 18 item 5).

A mix of exact and wildcard subscriptions used to cost each attach a pass over every address or
every wildcard subscription, so 100,000 subscriptions on one topic tree took hours to set up.
The work is counted, not timed: calls of the wildcard matcher plus nodes the topic indexes visit
(`visited`), so these tests fail the same way on a loaded machine as on an idle one.
"""
from __future__ import annotations

import random

import pytest

from hermod.broker.core import links, wildcards
from hermod.broker.core.forwarding import Divert, Target
from hermod.broker.core.message import MULTICAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.topic_index import AddressTrie, PatternTrie
from hermod.broker.core.wildcards import matches


class Sink:
    """The adapter side of a consumer (nothing is sent here: the subscriptions have no credit)."""

    def send(self, consumer, ref):
        raise AssertionError("no credit was given")

    def queue_deleted(self, consumer):
        pass


class Envelope:
    durable, priority, ttl, annotations, properties_count, app_properties_at = False, 4, 0, None, 0, -1


def send(po: PostOffice, address: str, body: str, rt=MULTICAST) -> None:
    po.ensure_address(address, rt)  # as a sender's attach does
    po.post(po.route(Message(body.encode(), Envelope(), address, rt), address, rt))


class Work:
    """Matcher calls plus index nodes visited by a PostOffice: the cost of binding."""

    def __init__(self, po: PostOffice, monkeypatch):
        self.po = po
        self.calls = 0
        real = wildcards._Pattern.matches

        def counted(pattern, address):
            self.calls += 1
            return real(pattern, address)

        monkeypatch.setattr(wildcards._Pattern, "matches", counted)
        wildcards._matches_cached.cache_clear()

    def total(self) -> int:
        visited = self.po.bound.addresses.visited + self.po.bound.patterns.visited
        return self.calls + visited

    def of(self, fn) -> int:
        before = self.total()
        fn()
        return self.total() - before


def subscribe(po: PostOffice, address: str, name: str):
    req = links.ConsumerRequest(address, MULTICAST, subscription_queue=name)
    return links.attach_consumer(po, req, Sink())


def populated(n: int) -> PostOffice:
    """n exact subscriptions on n addresses and n wildcard ones matching none of them (the
    benchmark's topic tree: `curve.other.I` and `curve.wI.#`)."""
    po = PostOffice()
    for i in range(n):
        subscribe(po, f"curve.other.{i}", f"exact-{i}")
        subscribe(po, f"curve.w{i}.#", f"wild-{i}")
    return po


def attach_costs(n: int, monkeypatch) -> dict[str, int]:
    po = populated(n)
    work = Work(po, monkeypatch)
    return {
        "exact attach": work.of(lambda: subscribe(po, "curve.other.new", "exact-new")),
        "wildcard attach": work.of(lambda: subscribe(po, "curve.wnew.#", "wild-new")),
        "exact detach": work.of(lambda: po.delete_queue("exact-new")),
        "wildcard detach": work.of(lambda: po.delete_queue("wild-new")),
        "divert on a pattern": work.of(lambda: po.add_divert(
            Divert("d", "curve.none.#", [Target("elsewhere")]))),
    }


def test_one_more_attach_of_each_kind_costs_the_same_at_1k_and_10k_subscriptions(monkeypatch):
    # A pass over what is there costs about 1,000 at 1k (and ten times that at 10k).
    small = attach_costs(1_000, monkeypatch)
    assert all(cost <= 50 for cost in small.values()), small
    large = attach_costs(10_000, monkeypatch)
    assert large == small


def test_a_hash_subscription_costs_in_proportion_to_the_addresses_it_matches(monkeypatch):
    po = populated(2_000)
    for i in range(10):
        po.create_address(f"sport.{i}", {MULTICAST})
    work = Work(po, monkeypatch)
    cost = work.of(lambda: subscribe(po, "sport.#", "all-sport"))
    assert cost <= 2 * 11 + 5  # the `sport` subtree, not the 4,000 other addresses
    assert all(po.queues["all-sport"] in po.addresses[f"sport.{i}"].bindings.multicast for i in range(10))


def test_a_pattern_of_many_hashes_costs_one_match_per_address_below_its_prefix(monkeypatch):
    po = populated(2_000)
    work = Work(po, monkeypatch)
    hostile = "curve." + ".".join(["#", "x"] * 200)  # 200 `#`s: a walk per `#` would visit 200 x 2,000 nodes
    cost = work.of(lambda: subscribe(po, hostile, "hostile"))
    assert cost <= 3 * 2_000, cost  # the `curve` subtree once, and one matcher call per address in it
    assert not any(po.queues["hostile"] in a.bindings.multicast for a in po.addresses.values() if not a.wildcard)


# -- the bindings stay what the matcher says ------------------------------------------------------

def test_wildcard_subscriptions_follow_addresses_created_and_deleted_later():
    po = PostOffice()
    sub = subscribe(po, "news.#", "all-news")
    stars = subscribe(po, "news.*", "one-level")
    send(po, "news.eu.sport", "a", rt=MULTICAST)
    send(po, "news.eu", "b", rt=MULTICAST)
    send(po, "weather", "c", rt=MULTICAST)
    assert [r.message.encoded for r in sub.queue.waiting()] == [b"a", b"b"]
    assert [r.message.encoded for r in stars.queue.waiting()] == [b"b"]

    po.delete_address("news.eu")
    assert "news.eu" not in po.addresses
    po.create_address("news.eu", {MULTICAST})
    assert sub.queue in po.addresses["news.eu"].bindings.multicast

    po.delete_queue("all-news")
    assert all(sub.queue not in a.bindings.multicast for a in po.addresses.values())
    send(po, "news.eu", "d", rt=MULTICAST)
    assert [r.message.encoded for r in stars.queue.waiting()] == [b"b", b"d"]


def test_a_removed_wildcard_divert_unbinds_from_every_address_it_matched():
    po = PostOffice()
    for name in ("orders.eu", "orders.us", "billing"):
        po.create_address(name, {MULTICAST})
    divert = Divert("copy", "orders.*", [Target("audit")])
    po.add_divert(divert)
    po.create_address("orders.asia", {MULTICAST})
    assert [n for n, a in po.addresses.items() if divert in a.bindings.all_diverts()] == ["orders.eu", "orders.us", "orders.asia"]
    po.remove_divert(divert)
    assert not any(divert in a.bindings.all_diverts() for a in po.addresses.values())
    po.create_address("orders.africa", {MULTICAST})
    assert divert not in po.addresses["orders.africa"].bindings.all_diverts()


def test_forwarders_bind_to_a_new_address_in_the_order_they_were_added():
    po = PostOffice()
    for f in (Divert("first", "a.#", [Target("x")]), Divert("second", "*.b", [Target("y")]),
              Divert("third", "a.*", [Target("z")], exclusive=True)):
        po.add_divert(f)
    po.create_address("a.b", {MULTICAST})
    assert [f.name for f in po.addresses["a.b"].bindings.all_diverts()] == ["third", "first", "second"]  # exclusive first
    po.create_address("c.b", {MULTICAST})
    assert [f.name for f in po.addresses["c.b"].bindings.all_diverts()] == ["second"]


# -- the indexes agree with the matcher ------------------------------------------------------------

WORDS = ["a", "b", "c", "", "b*", "ab"]
PATTERN_WORDS = WORDS + ["*", "#", ">"]


def _random_names(rng: random.Random, words: list[str], count: int) -> list[str]:
    return [".".join(rng.choice(words) for _ in range(rng.randint(1, 5))) for _ in range(count)]


@pytest.mark.parametrize("seed", range(5))
def test_the_indexes_find_exactly_what_the_matcher_matches(seed):
    rng = random.Random(seed)
    addresses = sorted(set(_random_names(rng, WORDS, 300)))
    patterns = sorted(set(_random_names(rng, PATTERN_WORDS, 200)))
    by_address, by_pattern = AddressTrie(), PatternTrie()
    for a in addresses:
        by_address.add(a)
    for p in patterns:
        by_pattern.add(p, p)
    for p in patterns:
        assert sorted(by_address.matching(p)) == [a for a in addresses if matches(p, a)], p
    for a in addresses:
        assert sorted(by_pattern.matching(a)) == [p for p in patterns if matches(p, a)], a
    # Removing half leaves the other half found, and the tries prune what leads nowhere.
    for a in addresses[::2]:
        by_address.remove(a)
    for p in patterns[::2]:
        by_pattern.remove(p, p)
    for p in patterns[1::2]:
        assert sorted(by_address.matching(p)) == [a for a in addresses[1::2] if matches(p, a)], p
    for a in addresses[1::2]:
        assert sorted(by_pattern.matching(a)) == [p for p in patterns[1::2] if matches(p, a)], a
    for a in addresses[1::2]:
        by_address.remove(a)
    for p in patterns[1::2]:
        by_pattern.remove(p, p)
    assert not by_address._root.children and not by_pattern._root.children


def test_routing_reaches_the_same_queues_as_before():
    po = PostOffice()
    subs = {p: subscribe(po, p, f"s{i}") for i, p in enumerate(["#", "a.#", "a.*", "*.b", "a.b", "a.>.c", "x.#"])}
    send(po, "a.b", "m", rt=MULTICAST)
    got = sorted(p for p, c in subs.items() if [r.message.encoded for r in c.queue.waiting()] == [b"m"])
    assert got == sorted(["#", "a.#", "a.*", "*.b", "a.b"])
