"""Queue: the messages waiting on one queue, its consumers, and dispatch between them.

A queue holds `Ref`s (one per message per queue, so a multicast message is shared, and each
queue counts its own deliveries). Dispatch hands messages to consumers with credit in
round-robin order; a consumer's selector filters what that consumer takes (others still get the
messages it skips). Dispatch runs once per reactor turn for every queue that changed, not once
per message (`PostOffice.schedule`).

A consumer's link (the protocol adapter) implements `send(consumer, ref)`; the queue never waits
on it. Outcomes come back as `acknowledge`, `release`, `reject`.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import TYPE_CHECKING, Callable

from . import ports
from .message import ANYCAST, Message

if TYPE_CHECKING:
    from .postoffice import PostOffice

Done = Callable[[BaseException | None], None]


class Ref:
    """One message on one queue."""

    __slots__ = ("message", "queue", "delivery_count", "consumer", "refused_by", "durable")

    def __init__(self, message: Message, queue: Queue, delivery_count: int = 0):
        self.message = message
        self.queue = queue
        self.delivery_count = delivery_count
        self.consumer: Consumer | None = None
        self.refused_by: set[int] | None = None  # consumers that said undeliverable-here
        self.durable = queue.durable and message.durable and queue.postoffice.journal.durable

    def __lt__(self, other: Ref) -> bool:
        return self.message.id < other.message.id

    def __repr__(self) -> str:
        return f"<Ref {self.message.id} on {self.queue.name} count={self.delivery_count}>"


_consumer_ids = itertools.count(1)


class Consumer:
    """A link taking messages from a queue. `credit` is kept in step with the link by the
    adapter; `blocked` is set while the connection cannot take more output."""

    __slots__ = ("id", "queue", "link", "credit", "selector", "selector_text", "browser", "priority",
                 "in_flight", "blocked", "snapshot", "no_local", "owner")

    def __init__(self, queue: Queue, link, selector=None, browser: bool = False, priority: int = 0,
                 no_local: str | None = None, owner: object = None, selector_text: str | None = None):
        self.id = next(_consumer_ids)
        self.queue = queue
        self.link = link
        self.credit = 0
        self.selector = selector
        self.selector_text = selector_text
        self.browser = browser
        self.priority = priority
        self.in_flight: dict[Ref, None] = {}
        self.blocked = False
        self.snapshot: deque[Ref] | None = None
        self.no_local = no_local  # container id whose messages this consumer must not get
        self.owner = owner

    def accepts(self, ref: Ref) -> bool:
        if ref.refused_by is not None and self.id in ref.refused_by:
            return False
        if self.selector is not None and not self.selector(ref.message):
            return False
        return True

    def __repr__(self) -> str:
        return f"<Consumer {self.id} on {self.queue.name}>"


def _take_nothing(message: Message) -> bool:
    return False


class Queue:
    def __init__(self, postoffice: PostOffice, name: str, address, routing_type: str = ANYCAST, *,
                 durable: bool = True, filter=None, filter_text: str | None = None,
                 max_consumers: int = -1, exclusive: bool = False, last_value_key: str | None = None,
                 auto_created: bool = False, purpose: str = "configured", temporary: bool = False,
                 extra: dict | None = None):
        self.postoffice = postoffice
        self.name = name
        self.address = address
        self.routing_type = routing_type
        self.durable = durable and not temporary
        self.filter = filter  # compiled predicate over a Message, or None
        self.filter_text = filter_text
        self.max_consumers = max_consumers
        self.exclusive = exclusive
        self.last_value_key = last_value_key
        self.auto_created = auto_created
        self.purpose = purpose
        self.temporary = temporary
        self.extra = extra or {}
        self.selector_aware = bool(self.extra.get("selector_aware"))
        self.messages: deque[Ref] = deque()
        self.consumers: list[Consumer] = []
        self._plain = True
        self._browsers = False
        self._turn = 0
        self.delivering = 0
        self.added = 0
        self.acked = 0
        self.deleted = False
        self.ever_consumed = False

    # -- state ---------------------------------------------------------------------------------
    @property
    def message_count(self) -> int:
        """Messages on the queue, including those out with consumers (as Artemis counts)."""
        return len(self.messages) + self.delivering

    def record(self) -> ports.QueueRecord:
        return ports.QueueRecord(
            name=self.name, address=self.address.name, routing_type=self.routing_type,
            filter=self.filter_text, max_consumers=self.max_consumers, exclusive=self.exclusive,
            last_value_key=self.last_value_key, auto_created=self.auto_created,
            purpose=self.purpose, extra=dict(self.extra))

    def accepts(self, message: Message) -> bool:
        return self.filter is None or self.filter(message)

    # -- messages in -----------------------------------------------------------------------------
    def enqueue(self, ref: Ref) -> None:
        self.added += 1
        self.messages.append(ref)
        if self.consumers:
            self.postoffice.schedule(self)

    def restore(self, refs: list[Ref]) -> None:
        """Put refs back in queue order (by message id), ahead of later arrivals."""
        if not refs:
            return
        refs.sort()
        if not self.messages or refs[-1].message.id < self.messages[0].message.id:
            self.messages.extendleft(reversed(refs))
        else:
            self.messages = deque(heapq.merge(refs, self.messages))
        if self.consumers:
            self.postoffice.schedule(self)

    # -- consumers -------------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        if consumer.browser:
            consumer.snapshot = deque(self.messages)
        self.consumers.append(consumer)
        self.ever_consumed = True
        self._consumers_changed()

    def _consumers_changed(self) -> None:
        # Dispatch takes the fast path only when every consumer takes every message.
        self._plain = not any(c.selector is not None or c.browser for c in self.consumers)
        self._browsers = any(c.browser for c in self.consumers)
        if self.selector_aware:
            self._refresh_selector_filter()

    def _refresh_selector_filter(self) -> None:
        """A selector-aware queue (virtual topics) takes only what one of its consumers'
        selectors matches; with the selector cache, what any remembered selector matches."""
        consumers = [c for c in self.consumers if not c.browser]
        if self.extra.get("selector_cache"):
            remembered = self.extra.setdefault("selectors", [])
            new = [c.selector_text or "TRUE" for c in consumers if (c.selector_text or "TRUE") not in remembered]
            if new:
                remembered.extend(new)
                self.postoffice.persist_queue(self)
            predicates = [None if t == "TRUE" else self.postoffice.compile_filter(t) for t in remembered]
        else:
            predicates = [c.selector for c in consumers]
        if not predicates:
            self.filter = _take_nothing
        elif any(p is None for p in predicates):
            self.filter = None
        else:
            self.filter = lambda m: any(p(m) for p in predicates)

    def remove_consumer(self, consumer: Consumer) -> None:
        """The consumer's unsettled messages go back to the queue in their original order."""
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        self._consumers_changed()
        back = list(consumer.in_flight)
        consumer.in_flight.clear()
        for ref in back:
            ref.consumer = None
            self.delivering -= 1
            ref.delivery_count -= 1  # never seen by an application: not an attempt
        self.restore(back)
        self.postoffice.queue_idle_check(self)

    # -- dispatch --------------------------------------------------------------------------------
    def dispatch(self) -> None:
        consumers = self.consumers
        if not consumers:
            return
        if self.messages:
            if self._plain:
                self._dispatch_simple(consumers)
            else:
                self._dispatch_scan(consumers)
        if self._browsers:
            for c in consumers:
                if c.browser and c.snapshot:
                    self._browse(c)

    def _next_ready(self, consumers: list[Consumer]) -> Consumer | None:
        n = len(consumers)
        for i in range(n):
            c = consumers[(self._turn + i) % n]
            if c.credit > 0 and not c.blocked and not c.browser:
                self._turn = (self._turn + i + 1) % n
                return c
        return None

    def _dispatch_simple(self, consumers: list[Consumer]) -> None:
        messages = self.messages
        while messages:
            c = self._next_ready(consumers)
            if c is None:
                return
            ref = messages[0]
            if ref.refused_by is not None and not c.accepts(ref):
                self._dispatch_scan(consumers)
                return
            messages.popleft()
            self._deliver(c, ref)

    def _dispatch_scan(self, consumers: list[Consumer]) -> None:
        """General case: selectors or refusals mean a message may suit only some consumers."""
        kept: list[Ref] = []
        messages = self.messages
        n = len(consumers)
        while messages:
            ready = [c for c in consumers if c.credit > 0 and not c.blocked and not c.browser]
            if not ready:
                break
            ref = messages.popleft()
            for i in range(n):
                c = consumers[(self._turn + i) % n]
                if c.credit > 0 and not c.blocked and not c.browser and c.accepts(ref):
                    self._turn = (self._turn + i + 1) % n
                    self._deliver(c, ref)
                    break
            else:
                kept.append(ref)
        if kept:
            messages.extendleft(reversed(kept))

    def _deliver(self, c: Consumer, ref: Ref) -> None:
        ref.delivery_count += 1
        ref.consumer = c
        c.in_flight[ref] = None
        c.credit -= 1
        self.delivering += 1
        c.link.send(c, ref)

    def _browse(self, c: Consumer) -> None:
        snapshot = c.snapshot
        while snapshot and c.credit > 0 and not c.blocked:
            ref = snapshot.popleft()
            if ref.queue is not self or (c.selector is not None and not c.selector(ref.message)):
                continue
            c.credit -= 1
            c.link.send(c, ref)

    # -- outcomes ------------------------------------------------------------------------------
    def _settle_out(self, ref: Ref) -> Consumer | None:
        c = ref.consumer
        if c is not None:
            c.in_flight.pop(ref, None)
            ref.consumer = None
            self.delivering -= 1
        return c

    def acknowledge(self, ref: Ref, done: Done | None = None) -> None:
        """Accepted: the message leaves the queue (durably before `done`)."""
        self._settle_out(ref)
        self.acked += 1
        if ref.durable:
            self.postoffice.journal.submit([ports.DeleteReference(self.name, ref.message.id)], done)
        elif done is not None:
            done(None)
        if not self.messages and not self.delivering:
            self.postoffice.queue_idle_check(self)

    def release(self, ref: Ref, *, failed: bool = False, undeliverable: bool = False) -> None:
        """Released / modified: back to the queue. `failed` counts the attempt (delivery-failed);
        `undeliverable` keeps it from this consumer from now on."""
        c = self._settle_out(ref)
        if undeliverable and c is not None:
            if ref.refused_by is None:
                ref.refused_by = set()
            ref.refused_by.add(c.id)
        if not failed:
            ref.delivery_count -= 1
        max_attempts = self.postoffice.settings_for(self.address.name).max_delivery_attempts
        if failed and 0 < max_attempts <= ref.delivery_count:
            self.postoffice.dead_letter(ref, reason="max-delivery-attempts")
            return
        if ref.durable and failed:
            self.postoffice.journal.submit(
                [ports.SetDeliveryCount(self.name, ref.message.id, ref.delivery_count)], None)
        self.restore([ref])

    def reject(self, ref: Ref, done: Done | None = None) -> None:
        """Rejected: straight to the dead-letter address, no retry (Artemis)."""
        self._settle_out(ref)
        self.postoffice.dead_letter(ref, reason="rejected", done=done)

    def remove_ref(self, ref: Ref) -> None:
        """Take a waiting ref off the queue (dead-lettering, expiry)."""
        try:
            self.messages.remove(ref)
        except ValueError:
            pass
