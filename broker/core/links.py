"""What attaching a producer or a consumer means in the address model (Artemis's
AMQP mapping rules), independent of AMQP: the protocol adapter turns a link's terminus
into a `ProducerRequest` / `ConsumerRequest`, and these functions resolve, create and check.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from .address import Address, QueuePurpose
from .errors import (IllegalState, InvalidField, NotAuthorized, QueueNotFound,
                     ResourceLimitExceeded, RoutingTypeMismatch)
from .flow import BLOCK
from .message import ANYCAST, MULTICAST
from .postoffice import PostOffice
from .queue import Consumer, Queue


@dataclass(slots=True)
class ProducerRequest:
    address: str | None  # None: anonymous relay
    routing_type: str | None = None  # from capability or prefix
    queue: str | None = None  # FQQN target
    dynamic: bool = False
    temporary_kind: str = ANYCAST  # dynamic target: anycast (temporary queue) or multicast
    user: str | None = None  # who attaches: a temporary queue belongs to its maker


@dataclass(slots=True)
class ProducerTarget:
    address: str | None
    routing_type: str | None  # fixed by capability/prefix
    attach_routing_type: str | None  # found at attach (rule 3/4); used when nothing else says
    queue: str | None = None
    temporary: bool = False
    parts: list[ProducerTarget] | None = None  # a client-side composite: one copy to each part
    held: Address | None = None  # the Address whose auto-created resources this sender keeps


def _hold(po: PostOffice, target: ProducerTarget) -> ProducerTarget:
    address = po.addresses.get(target.address) if target.address is not None else None
    if address is not None:
        po.sender_attached(address)
        target.held = address
    return target


def blocked_downstream(po: PostOffice, target: ProducerTarget) -> bool:
    """Is a destination this sender's messages are copied to (a part of its composite target,
    a divert or composite on its address) full under the `block` policy? Then the producer
    gets no credit, as for its own address."""
    if target.parts:
        names = [p.address for p in target.parts]
    else:
        address = po.addresses.get(target.address) if target.address else None
        diverts = address.bindings.all_diverts() if address is not None else []
        if not diverts:
            return False
        names = [t.address for d in diverts for t in d.targets]
    return any(po.flow.verdict(n) == BLOCK for n in names)


def detach_producer(po: PostOffice, target: ProducerTarget) -> None:
    """The sender's link is gone: what it kept (its address, auto-created queues) may go."""
    for part in target.parts or ():
        detach_producer(po, part)
    address, target.held = target.held, None
    if address is not None:
        po.sender_detached(address)


def attach_producer(po: PostOffice, req: ProducerRequest) -> ProducerTarget:
    if req.dynamic:
        name = str(uuid.uuid4())
        if req.temporary_kind == ANYCAST:
            po.create_queue(name, name, ANYCAST, temporary=True, purpose=QueuePurpose.TEMPORARY,
                            extra={"owner": req.user} if req.user is not None else None)
        else:
            po.create_address(name, {MULTICAST}, temporary=True)
        return ProducerTarget(name, req.temporary_kind, req.temporary_kind, temporary=True)
    if req.address is None:
        return ProducerTarget(None, req.routing_type, None)
    if req.address == "":
        raise InvalidField("empty target address")
    if req.queue is not None:
        address = po.addresses.get(req.address)
        if address is None or req.queue not in address.queues:
            raise QueueNotFound(f"target queue {req.address}::{req.queue} does not exist")
        return _hold(po, ProducerTarget(req.address, req.routing_type, None, queue=req.queue))
    rt = req.routing_type
    found = po.resolve_send_routing_type(req.address, rt)
    po.ensure_send_target(req.address, found)
    return _hold(po, ProducerTarget(req.address, rt, found))


@dataclass(slots=True)
class ConsumerRequest:
    address: str
    routing_type: str | None = None  # from capability or prefix
    queue: str | None = None  # FQQN source
    dynamic: bool = False
    browser: bool = False
    selector: str | None = None
    selector_predicate: object = None
    no_local_container: str | None = None
    priority: int = 0
    # Subscription (multicast) naming, decided by the adapter from container id + link name:
    subscription_queue: str | None = None
    durable: bool = False
    shared: bool = False
    exclusive: bool = False  # ActiveMQ's consumer.exclusive=true
    user: str | None = None  # who attaches: a durable subscription belongs to its creator
    # Attributes a protocol keeps with a subscription queue it creates (stored with a durable
    # one): MQTT's subscription options, so a persistent session resumes after a restart.
    extra: dict | None = None


def _source_routing_type(po: PostOffice, req: ConsumerRequest, address: Address | None) -> str:
    """The routing type a named source reads: the capability or prefix's, else the queue's (an
    FQQN), else the address's (anycast first), else the settings' default."""
    rt = req.routing_type
    if rt is not None:
        return rt
    if address is None:
        return po.settings_for(req.address).default_routing_type
    if req.queue is not None:
        queue = address.queues.get(req.queue)
        if queue is not None:
            return queue.routing_type
    return ANYCAST if ANYCAST in address.routing_types else MULTICAST


def browses(po: PostOffice, req: ConsumerRequest) -> bool:
    """Whether this attach would be a browser, which takes nothing: distribution mode `copy` on
    an anycast queue, or on any queue named by FQQN. A subscription (a multicast attach by
    address) asked with `copy` is consumed all the same (JMS clients ask for it on every
    durable subscription; Artemis does the same), so such an attach takes messages, and its
    right is `consume`, not `browse`. Decided before anything is resolved or created, with the
    rule `attach_consumer` applies."""
    if not req.browser or req.dynamic or not req.address or req.queue is not None:
        return req.browser
    return _source_routing_type(po, req, po.addresses.get(req.address)) == ANYCAST


def attach_consumer(po: PostOffice, req: ConsumerRequest, link, owner=None) -> Consumer:
    """Resolve the queue a consumer reads (creating it when allowed) and attach to it."""
    if req.dynamic:
        name = str(uuid.uuid4())
        temporary = po.create_queue(name, name, ANYCAST, temporary=True, purpose=QueuePurpose.TEMPORARY,
                                    extra={"owner": req.user} if req.user is not None else None)
        return _attach(temporary, req, link, owner)
    if not req.address:
        raise InvalidField("empty source address")
    address = po.addresses.get(req.address)
    rt = _source_routing_type(po, req, address)
    if address is None:
        address = po.ensure_address(req.address, rt)
    elif rt not in address.routing_types and req.queue is None:
        raise RoutingTypeMismatch(f"address {req.address} is not {rt}")
    if rt == ANYCAST:
        anycast = _anycast_queue(po, address, req)
        if anycast.purpose == QueuePurpose.TEMPORARY:  # found by its name: its maker's alone
            check_owner(po, anycast, req.user)
        return _attach(anycast, req, link, owner)
    if req.queue is None:
        # Distribution mode `copy` browses queues, not subscriptions: JMS clients ask for it on
        # every durable subscription, which is still consumed (Artemis does the same). A queue
        # named by FQQN, a subscription's included, is browsed as asked (`browses`).
        req.browser = False
    else:
        queue = address.queues.get(req.queue)
        if queue is None:
            if not po.settings_for(address.name).auto_create_queues:
                raise QueueNotFound(f"queue {req.address}::{req.queue} does not exist")
            queue = po.create_queue(req.queue, address.name, MULTICAST, filter_text=req.selector,
                                    filter=req.selector_predicate, auto_created=True, purpose=QueuePurpose.AUTO)
        return _attach(queue, req, link, owner, selector_on_queue=queue.filter_text == req.selector)
    return _attach(_subscription_queue(po, address, req), req, link, owner, selector_on_queue=True)


def _anycast_queue(po: PostOffice, address, req: ConsumerRequest) -> Queue:
    if req.queue is not None:
        queue = address.queues.get(req.queue)
        if queue is None:
            raise QueueNotFound(f"queue {address.name}::{req.queue} does not exist")
        return queue
    queue = address.queues.get(address.name)
    if queue is not None and queue.routing_type == ANYCAST:
        return queue
    if address.bindings.anycast:
        return address.bindings.anycast[0]
    if not po.settings_for(address.name).auto_create_queues:
        raise QueueNotFound(f"address {address.name} has no anycast queue")
    if ANYCAST not in address.routing_types:
        po.ensure_address(address.name, ANYCAST)
    return po.create_queue(address.name, address.name, ANYCAST, auto_created=True, purpose=QueuePurpose.AUTO)


def _subscription_queue(po: PostOffice, address, req: ConsumerRequest) -> Queue:
    name = req.subscription_queue or str(uuid.uuid4())
    queue = po.queues.get(name)
    if queue is not None:
        check_owner(po, queue, req.user)
        changed = queue.address is not address or queue.filter_text != _filter_text(req)
        if changed:
            if queue.consumers:
                raise IllegalState(f"subscription {name} is in use with another address or selector")
            if queue.durable and po.creation_guard is not None:
                # Replacing it is unsubscribing (its messages go): `delete_queue`, as closing it.
                po.creation_guard("delete_queue", queue.address.name)
            po.delete_queue(name)
            queue = None
        elif not req.shared and queue.consumers and req.durable:
            raise IllegalState(f"durable subscription {name} already has a consumer")
    if queue is None:
        queue = po.create_queue(
            name, address.name, MULTICAST, durable=req.durable, filter_text=_filter_text(req),
            filter=req.selector_predicate, max_consumers=-1 if req.shared else 1, auto_created=not req.durable,
            purpose=QueuePurpose.SUBSCRIPTION, temporary=not req.durable and not req.shared,
            extra=_subscription_extra(req))
    return queue


def _subscription_extra(req: ConsumerRequest) -> dict | None:
    extra = dict(req.extra) if req.extra else {}
    if req.no_local_container:
        extra["no_local"] = req.no_local_container
    if req.user is not None:  # whose it is, and whose rights its wildcard bindings follow
        extra["owner"] = req.user
    return extra or None


def check_owner(po: PostOffice, queue: Queue, user: str | None) -> None:
    """A subscription or a temporary queue belongs to the user who made it (`owner` in its
    extra): the post office's `may_take_over` port (installed by the composition root, which
    asks the security layer) decides whether `user` may resume it."""
    owner = queue.extra.get("owner")
    if owner is None or po.may_take_over is None or po.may_take_over(user, owner):
        return
    kind = "temporary queue" if queue.purpose == QueuePurpose.TEMPORARY else "subscription"
    raise NotAuthorized(f"{kind} {queue.name} belongs to another user")


def _filter_text(req: ConsumerRequest) -> str | None:
    return req.selector


def _attach(queue: Queue, req: ConsumerRequest, link, owner, selector_on_queue: bool = False) -> Consumer:
    if queue.max_consumers >= 0 and len(queue.consumers) >= queue.max_consumers and not req.browser:
        raise ResourceLimitExceeded(f"queue {queue.name} already has {len(queue.consumers)} consumers")
    selector = None if selector_on_queue else req.selector_predicate
    consumer = Consumer(queue, link, selector=selector, browser=req.browser, priority=req.priority,
                        owner=owner, selector_text=None if selector_on_queue else req.selector,
                        exclusive=req.exclusive)
    queue.add_consumer(consumer)
    return consumer


def attach_virtual_topic_consumer(po: PostOffice, vt, topic: str, req: ConsumerRequest, link,
                                  owner=None) -> Consumer:
    """`Consumer.A.VirtualTopic.Orders`: the durable, shared queue of that name on the topic's
    multicast address (created on first use, never auto-deleted)."""
    po.ensure_address(topic, MULTICAST)
    queue = po.queues.get(req.address)
    if queue is None:
        queue = po.create_queue(req.address, topic, MULTICAST, durable=True, purpose=QueuePurpose.VIRTUAL_TOPIC,
                                extra={"selector_aware": vt.selector_aware, "selector_cache": vt.selector_cache})
    elif queue.address.name != topic:
        raise IllegalState(f"queue {req.address} exists on address {queue.address.name}")
    return _attach(queue, req, link, owner)


def detach_consumer(po: PostOffice, consumer: Consumer, *, unsubscribe: bool = False,
                    attempted: bool = False, keep: bool = False,
                    link_key: tuple[str, str] | None = None) -> Queue | None:
    """The consumer's link is gone. A durable subscription ends only with `unsubscribe`: the
    adapter says so when the subscription's own link (same link name and container id, durable
    terminus) closed with closed=true; never for a reader by FQQN, a detach, a dropped
    connection or a broker stop. Temporary queues and non-durable subscriptions go with their
    last consumer. `attempted`: the consumer's connection failed, so what it had in flight
    counts as a delivery attempt (Artemis). `keep` (the link detached without closing): a
    temporary queue or non-durable subscription is kept instead, and returned, for the
    adapter to start its terminus expiry countdown (core.lingering); `link_key` (container id,
    link name) finds a subscription again."""
    queue = consumer.queue
    expirable = queue.temporary or (queue.purpose == QueuePurpose.SUBSCRIPTION and not queue.durable)
    kept = None
    if keep and expirable and not unsubscribe and queue.consumers == [consumer] and not queue.deleted:
        # Kept before its last consumer goes, so the idle check does not auto-delete it.
        po.lingering.keep(queue, link_key if queue.purpose == QueuePurpose.SUBSCRIPTION else None)
        kept = queue
    queue.remove_consumer(consumer, attempted=attempted)
    if kept is not None or queue.deleted or queue.consumers:
        return kept
    if expirable or (queue.purpose == QueuePurpose.SUBSCRIPTION and unsubscribe):
        po.delete_queue(queue.name)
    return None


__all__ = ["browses", "check_owner", "ProducerRequest", "ProducerTarget", "ConsumerRequest", "attach_producer", "detach_producer",
           "attach_consumer", "detach_consumer", "attach_virtual_topic_consumer"]
