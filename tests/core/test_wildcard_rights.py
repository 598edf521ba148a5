"""A wildcard subscription is bound only to the matching addresses its owner may consume (the
post office's `may_consume` port, asked at bind time, never per message), and a rebind follows
new rights. A subscription without an owner is bound everywhere."""
from __future__ import annotations

from hermod.broker.core import links
from hermod.broker.core.message import MULTICAST, Message
from hermod.broker.core.postoffice import PostOffice


class Sink:
    def send(self, consumer, ref):
        raise AssertionError("no credit was given")

    def queue_deleted(self, consumer):
        pass


class Envelope:
    durable, priority, ttl, annotations, properties_count, app_properties_at = False, 4, 0, None, 0, -1


def send(po: PostOffice, address: str, body: str) -> None:
    po.ensure_address(address, MULTICAST)
    po.post(po.route(Message(body.encode(), Envelope(), address, MULTICAST), address, MULTICAST))


def subscribe(po: PostOffice, pattern: str, name: str, user: str | None):
    req = links.ConsumerRequest(pattern, MULTICAST, subscription_queue=name, user=user)
    return links.attach_consumer(po, req, Sink())


def bodies(consumer) -> list[bytes]:
    return [r.message.encoded for r in consumer.queue.waiting()]


def test_bound_only_where_the_owner_may_consume_and_rebound_when_rights_change():
    po = PostOffice()
    secret = {"secret.salaries", "secret.bonus"}
    granted: set[str] = set()
    asked: list[tuple[str, str]] = []

    def may_consume(owner: str, address: str) -> bool:
        asked.append((owner, address))
        return address not in secret or owner in granted

    po.may_consume = may_consume
    po.create_address("secret.salaries", {MULTICAST})  # before the subscriptions
    mine = subscribe(po, "#", "reader-all", "reader")
    theirs = subscribe(po, "*.salaries", "open-salaries", None)  # no owner: bound everywhere
    po.create_address("secret.bonus", {MULTICAST})  # after them
    for address, body in (("secret.salaries", "s1"), ("secret.bonus", "s2"), ("public.salaries", "p1")):
        send(po, address, body)
    assert bodies(mine) == [b"p1"]
    assert bodies(theirs) == [b"s1", b"p1"]
    assert {a for o, a in asked if o == "reader"} >= secret

    asked.clear()
    send(po, "public.salaries", "p2")
    assert asked == []  # routing a message asks nothing: the decision was taken at bind time

    granted.add("reader")
    po.rebind_wildcard_subscriptions()
    send(po, "secret.salaries", "s3")
    assert bodies(mine) == [b"p1", b"p2", b"s3"]
    granted.clear()
    po.rebind_wildcard_subscriptions()
    send(po, "secret.bonus", "s4")
    send(po, "public.salaries", "p3")
    assert bodies(mine) == [b"p1", b"p2", b"s3", b"p3"]
