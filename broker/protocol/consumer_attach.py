"""The attach of a ConsumerLink (the cold path; Proton's data objects are fine here): the
client's source read into a core `ConsumerRequest` in named steps, the consumers attached (one
per part of a composite source, or a durable subscription found by the link's name), the source
we answer with, link recovery (§2.6.13), and the open once the queues it created are stored.

`ConsumerAttach` is the half of `ConsumerLink` (protocol/consumer.py) that runs once per attach;
the per-message half (send, dispositions, credit) stays there.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import lib
from .binding import Described, dat2obj, obj2dat, symbol

from ..core import errors, links as core_links
from ..core.message import ANYCAST, MULTICAST
from . import conditions, jms, recovery
from .conditions import set_condition
from .terminus import (NO_LOCAL_DESCRIPTORS, find_filter, parse_name,
                       read_terminus, split_composite, address_options, consumer_priority,
                       subscription_queue_name)

if TYPE_CHECKING:
    from .connection import Connection
    from .consumer import ConsumerLink


def _link_priority(link) -> object:
    """The consumer priority in the link's properties (qpid-jms sends it there), else 0."""
    props = dat2obj(lib.pn_link_remote_properties(link)) or {}
    return props.get(symbol("priority"), 0) if isinstance(props, dict) else 0


def _filters(remote) -> tuple[str | None, bool, dict]:
    """(selector text, no-local asked, the filters we echo in our source: those in force, as
    the client sent them)."""
    accepted: dict = {}
    selector_text = None
    if remote.selector is not None:
        key, value, selector_text = remote.selector
        accepted[key] = value
    no_local = find_filter(remote.filters, NO_LOCAL_DESCRIPTORS)
    if no_local is not None:
        accepted[no_local[0]] = no_local[1]
    return selector_text, no_local is not None, accepted


class ConsumerAttach:
    """ConsumerLink's attach steps (a mixin: the attributes are ConsumerLink's)."""

    __slots__ = ()

    @classmethod
    def attach(cls, conn: Connection, link) -> ConsumerLink:
        """A client's attach as a receiver, in steps: the source, its filters, the request to
        the core, the consumers, the source we answer with, link recovery, then the open once
        the queues it created are stored. Errors are the core's typed exceptions."""
        remote = read_terminus(lib.pn_link_remote_source(link))
        handler = cls(conn, link)
        handler.expiry = (remote.expiry_policy, remote.timeout)
        handler.jms = jms.is_jms_client(conn.conn)
        priority = _link_priority(link)
        if not remote.present or (remote.address is None and not remote.dynamic):
            return handler._attach_existing_subscription(remote)
        selector_text, no_local, accepted_filters = _filters(remote)
        req = handler._request(remote, selector_text, no_local, priority)
        handler.browser = remote.distribution_mode == "copy"
        handler.consumers = handler._attach_parts(req, remote)
        handler._note_own_subscription(req)
        handler._answer_source(remote, accepted_filters)
        handler.keeps_state = lib.pn_terminus_get_durability(lib.pn_link_remote_source(link)) == lib.PN_DELIVERIES
        handler._recover(conn.frame_tap.claim(True, handler.name))
        handler._open_when_stored()
        return handler

    def _request(self, remote, selector_text: str | None, no_local: bool, priority) -> core_links.ConsumerRequest:
        """The core's request: a dynamic node, or the named one (prefixes, capabilities, FQQN,
        `?consumer-priority=` and `consumer.exclusive` options, subscription naming)."""
        broker, conn = self.broker, self.conn
        predicate = broker.compile_consumer_selector(selector_text) if selector_text else None
        user = conn.principal.name if conn.principal is not None else None
        if remote.dynamic:
            return core_links.ConsumerRequest("", dynamic=True, user=user)
        address, options = address_options(remote.address)
        if consumer_priority(options) is not None:
            priority = consumer_priority(options)
        server = broker.config.server
        name = parse_name(address, remote.capabilities, server.anycast_prefixes, server.multicast_prefixes,
                          composite="," in address)
        caps = set(remote.capabilities)
        shared = "shared" in caps
        self.durable_subscription = remote.durable
        return core_links.ConsumerRequest(
            name.address, name.routing_type, name.queue, browser=remote.distribution_mode == "copy",
            selector=selector_text, selector_predicate=predicate, priority=int(priority or 0),
            no_local_container=conn.container_id or "" if no_local else None,
            subscription_queue=self._subscription_queue(remote, shared, "global" in caps),
            durable=remote.durable, shared=shared,
            exclusive=options.get("consumer.exclusive", "").lower() == "true", user=user)

    def _subscription_queue(self, remote, shared: bool, global_: bool) -> str | None:
        """A durable or shared subscription's queue name (Artemis's naming), else the queue a
        non-durable subscription of this link left lingering, if any."""
        if remote.durable or shared:
            return subscription_queue_name(self.conn.container_id, self.name, shared=shared,
                                           global_=global_, durable=remote.durable)
        return self.broker.postoffice.lingering.find(self.link_key)

    def _note_own_subscription(self, req: core_links.ConsumerRequest) -> None:
        """The durable subscription this link's own terminus names: only closing it ends it."""
        if (self.durable_subscription and req.queue is None and req.subscription_queue is not None
                and self.consumers and self.consumers[0].queue.name == req.subscription_queue):
            self.subscription = req.subscription_queue

    def _answer_source(self, remote, accepted_filters: dict) -> None:
        """Our source echoes the client's, with only the filters in force (and a dynamic
        node's name); settlement modes as the client asked, receiver settles first."""
        link = self.link
        local = lib.pn_link_source(link)
        lib.pn_terminus_copy(local, lib.pn_link_remote_source(link))
        filt = lib.pn_terminus_filter(local)
        lib.pn_data_clear(filt)
        if accepted_filters:
            obj2dat(accepted_filters, filt)
        if remote.dynamic:
            cproton.pn_terminus_set_address(local, self.consumers[0].queue.name)
        lib.pn_terminus_copy(lib.pn_link_target(link), lib.pn_link_remote_target(link))
        lib.pn_link_set_snd_settle_mode(link, lib.pn_link_remote_snd_settle_mode(link))
        lib.pn_link_set_rcv_settle_mode(link, lib.PN_RCV_FIRST)

    def _recover(self, remote_unsettled: dict | None) -> None:
        """A receiver re-attaching with its unsettled map (§2.6.13): our attach carries ours
        (the deliveries of the link's last attachment it had not settled); those it reports
        accepted or rejected get that outcome where their message still waits; the rest are
        sent again (as their messages' deliveries, under the same tags)."""
        if remote_unsettled is None:
            return
        principal, authorization = self.conn.principal, self.broker.authorization
        # Only the user whose link it was gets its state (another's attach under the same
        # container id and link name gets none of it), and only the deliveries on addresses
        # that user may consume now: recovery touches their queues, not this attach's.
        resumed = recovery.memory_of(self.broker).consumer_resumed(
            self.link_key, lambda owner: authorization.may_take_over(principal, owner))
        last_tag, sent = resumed if resumed is not None else (0, self._waiting_by_tag(remote_unsettled))
        if authorization.enabled:
            sent = {tag: ref for tag, ref in sent.items()
                    if authorization.allows(principal, "consume", ref.queue.address.name)}
        self.conn.frame_tap.max_frame = lib.pn_transport_get_remote_max_frame(self.conn.transport)
        self.conn.frame_tap.answers[self.name] = {tag: None for tag in sent}
        self._tag_n = max(self._tag_n, last_tag)
        resume = []
        for tag, state in remote_unsettled.items():
            ref = sent.get(tag)
            code = recovery.state_code(state)
            if ref is None:
                continue
            if code not in (recovery.ACCEPTED, recovery.REJECTED):
                resume.append(tag)  # back on its queue: sent again, as the same delivery resumed
            elif ref.queue.take_back_waiting(ref):
                (ref.queue.acknowledge if code == recovery.ACCEPTED else ref.queue.reject)(ref)
        if resume and len(self.consumers) == 1:  # tags are message ids: the resent ones match
            self.conn.frame_tap.resuming[self.name] = recovery.ResumeTags(resume)

    def _waiting_by_tag(self, remote_unsettled: dict) -> dict:
        """After a broker restart nothing is remembered of the link: the tags a recovering
        receiver names are message ids (see `send`); those of its durable subscription's
        messages still waiting near the head of the queue (where deliveries in flight at the
        restart are put back) are found by a bounded look, so an attach costs O(MAX_TAGS)."""
        if not self.keeps_state or len(self.consumers) != 1:
            return {}
        queue = self.consumers[0].queue
        if queue.purpose != "subscription" or not queue.durable:
            return {}  # only a durable subscription is the link's own, kept through a restart
        wanted = {tag: int.from_bytes(tag, "little") for tag in remote_unsettled
                  if isinstance(tag, bytes) and len(tag) == 8}
        if not wanted:
            return {}
        by_id = {ref.message.id: ref for ref in itertools.islice(queue.backlog, recovery.MAX_TAGS)}
        return {tag: by_id[i] for tag, i in wanted.items() if i in by_id}

    def _open_when_stored(self) -> None:
        """Answer the attach once the queues it created are in the store: a client told that its
        durable subscription exists must find it after a crash."""
        waiting = [c.queue for c in self.consumers if not c.queue.persisted]
        if not waiting:
            self._open()
            return
        remaining = {id(q) for q in waiting}

        def stored(queue, error: BaseException | None) -> None:
            if not self.active:
                return
            if error is not None:
                self.refuse_late(conditions.INTERNAL_ERROR, f"queue {queue.name} not stored: {error}")
                return
            remaining.discard(id(queue))
            if not remaining:
                self._open()

        for queue in waiting:
            queue.when_persisted(stored)

    def _open(self) -> None:
        self.opened = True
        lib.pn_link_open(self.link)
        conn = self.conn
        if conn.writing_paused or conn.output_full:
            self.set_blocked(True)  # its connection's output is backed up: it waits too
        self.on_flow()  # credit the client granted while the attach was pending
        self.conn.server.mark(self.conn)

    def refuse_late(self, condition: str, description: str) -> None:
        """Refuse an attach that was waiting for the store."""
        self.conn.links.pop(self.link, None)
        self.on_detach(closed=True)
        set_condition(lib.pn_link_condition(self.link), condition, description)
        lib.pn_terminus_set_type(lib.pn_link_source(self.link), lib.PN_UNSPECIFIED)
        lib.pn_link_open(self.link)
        lib.pn_link_close(self.link)
        self.conn.server.mark(self.conn)

    def _attach_existing_subscription(self, remote) -> ConsumerLink:
        """No source: look up a durable subscription by link name (JMS re-subscribe lookup)."""
        # Artemis reads `global` from the link's desired capabilities, which this Proton binding
        # does not expose: try the client-id name first, then the global one.
        shared = "|" in self.name
        po = self.broker.postoffice
        queue = None
        for global_ in (False, True):
            queue_name = subscription_queue_name(self.conn.container_id, self.name, shared=shared,
                                                 global_=global_, durable=True)
            queue = po.queues.get(queue_name)
            if queue is not None and queue.purpose == "subscription":
                break
            queue = None
        if queue is None:
            raise errors.QueueNotFound(f"Unknown subscription link: {self.name}")
        principal = self.conn.principal
        core_links.check_owner(self.broker.postoffice, queue, principal.name if principal is not None else None)
        if self.broker.acting is not None:
            self.broker.authorize("consume", queue.address.name)
        req = core_links.ConsumerRequest(queue.address.name, MULTICAST, queue.name)
        self.consumers = [core_links._attach(queue, req, self, self.conn, selector_on_queue=True)]
        self.durable_subscription = True
        self.subscription = queue.name  # found by this link's name: closing it unsubscribes
        local = lib.pn_link_source(self.link)
        cproton.pn_terminus_set_address(local, queue.name)
        lib.pn_terminus_set_type(local, lib.PN_SOURCE)
        lib.pn_terminus_set_durability(local, lib.PN_DELIVERIES)
        lib.pn_terminus_set_expiry_policy(local, lib.PN_EXPIRE_NEVER)
        lib.pn_terminus_set_distribution_mode(local, lib.PN_DIST_MODE_COPY)
        obj2dat([symbol("topic")], lib.pn_terminus_capabilities(local))
        if queue.filter_text:
            obj2dat({symbol("jms-selector"): Described(symbol("apache.org:selector-filter:string"),
                                                       queue.filter_text)}, lib.pn_terminus_filter(local))
        lib.pn_terminus_copy(lib.pn_link_target(self.link), lib.pn_link_remote_target(self.link))
        lib.pn_link_set_snd_settle_mode(self.link, lib.pn_link_remote_snd_settle_mode(self.link))
        self._open()
        return self

    def _attach_parts(self, req: core_links.ConsumerRequest, remote) -> list:
        """A source `a,b,topic://c` consumes from every part (ActiveMQ Classic composite)."""
        if req.dynamic or "," not in req.address:
            return [self.broker.attach_consumer(req, self, owner=self.conn)]
        server = self.broker.config.server
        consumers = []
        try:
            for part in split_composite(remote.address):
                name = parse_name(part, [], server.anycast_prefixes, server.multicast_prefixes)
                sub = core_links.ConsumerRequest(
                    name.address, name.routing_type or ANYCAST, name.queue, browser=req.browser,
                    selector=req.selector, selector_predicate=req.selector_predicate, priority=req.priority,
                    user=req.user)
                consumers.append(self.broker.attach_consumer(sub, self, owner=self.conn))
        except errors.HermodError:
            for c in consumers:
                core_links.detach_consumer(self.broker.postoffice, c)
            raise
        return consumers
