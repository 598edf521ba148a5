"""Queue: the messages waiting on one queue, its consumers, and dispatch between them.

Waiting messages are kept by priority (`backlog.Backlog`); messages not due yet (scheduled
delivery, redelivery delay) wait in a `backlog.Schedule`. The queue is its state
(`queue_state.QueueState`) plus one mixin per concern: `dispatch.Dispatch` (who gets what),
`paging.Paging` (a window in memory, the rest in the store or the spool), `outcomes.Outcomes`
(acknowledge, release, reject, redelivery, expiry). This module has what joins them: messages
coming in, the timer of scheduled messages, and consumers coming and going.

The queue sees its post office only through `ports.QueueHost`.
"""
from __future__ import annotations

import logging

from . import ports
from .consumer import Consumer, Ref
from .dispatch import GROUP_CLOSE, MAX_GROUPS, SCAN_BUDGET, Dispatch
from .message import Message
from .outcomes import Outcomes
from .paging import PAGE_MEMORY_SHARE, PAGE_RETRY_MS, PAGE_WINDOW, Paging

log = logging.getLogger("hermod.core")


def _take_nothing(message: Message) -> bool:
    return False


class Queue(Dispatch, Paging, Outcomes):
    __slots__ = ()

    # -- messages in -----------------------------------------------------------------------------
    def enqueue(self, ref: Ref) -> None:
        self.added += 1
        message = ref.message
        if message.id > self._cursor:
            self._cursor = message.id
        # Its size without reading `encoded`, which joins a divert copy's shared body (fanout,
        # 10 diverts: the join was 4.5% of the broker's CPU, once per copy enqueued).
        size = message.size
        self.size += size
        self.held += 1
        self.host.flow.arrived(self.address, size)
        if self.last_value_key is not None:
            self._replace_last_value(ref)
        # `group_id` and `scheduled_time` read only when they can be set: a group id needs
        # more than 10 properties; the due time is kept once read (a divert copy has it from
        # its original). With `Message.priority` inline in `Backlog.append` and the expiry read
        # the same way in `_dispatch_one`: in process (route + admit + post_now, 10 diverts)
        # 38.3-40.0 -> 36.2-36.8 µs per original (3 interleaved); live fanout (30k, memory,
        # with `send_run`) 1.088 -> 0.989 broker CPU s per 100k deliveries (6 interleaved,
        # load 2.9-4.4: other benchmarks ran).
        if not self._groups_seen and message.envelope.properties_count > 10 and message.group_id is not None:
            self._groups_seen = True
            self._plain = False
        due = message._scheduled
        if due is None:
            due = message.scheduled_time
        if due and due > self.host.clock.now_ms():
            self.scheduled.add(due, ref)
            self._arm_timer()
            return
        self.backlog.append(ref)
        if self.consumers and not self.dirty:  # no call per message once marked (figure: latency.py)
            self.host.schedule(self)

    def recover(self, ref: Ref) -> None:
        """A ref read back from the store at start: in order, not counted as a new arrival."""
        self.enqueue(ref)
        self.added -= 1

    def restore(self, refs: list[Ref]) -> None:
        """Put refs back in queue order (by message id), ahead of later arrivals."""
        if not refs:
            return
        self.backlog.restore(refs)
        if self.consumers:
            self.host.schedule(self)

    def _account(self, size: int, refs: int) -> None:
        self.size += size
        self.held += refs
        self.host.flow.account(self.address, size, refs)

    def _replace_last_value(self, ref: Ref) -> None:
        """Last-value queue: a newer message with the same key replaces a waiting older one."""
        key = ref.message.application_properties.get(self.last_value_key)
        if key is None:
            return
        try:
            old = self._last_values.get(key)
        except TypeError:  # an unhashable value cannot be a key
            return
        self._last_values[key] = ref
        if old is not None and old.consumer is None and (self.backlog.remove(old) or self.scheduled.remove(old)):
            self._forget(old)
            if old.durable:
                self.host.journal.submit([ports.DeleteReference(self.name, old.message.id)], None)

    def last_values(self) -> dict[object, Ref]:
        """A last-value queue's newest waiting ref per key (read only: MQTT's retained
        messages are looked up here by topic)."""
        return self._last_values

    def _forget(self, ref: Ref) -> None:
        """The ref has left the queue for good (acknowledged, replaced, moved)."""
        self._account(-ref.message.size, -1)
        if self.last_value_key is not None:
            self._forget_last_value(ref)

    def _forget_last_value(self, ref: Ref) -> None:
        """A last-value queue's ref left: its key no longer names it."""
        key = ref.message.application_properties.get(self.last_value_key)
        try:
            if key is not None and self._last_values.get(key) is ref:
                del self._last_values[key]
        except TypeError:
            pass

    # -- timers ----------------------------------------------------------------------------------
    def _arm_timer(self) -> None:
        due = self.scheduled.next_due()
        if due is None or (self._timer is not None and self._timer_due <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = self.host.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.deleted:
            return
        due = self.scheduled.pop_due(self.host.clock.now_ms())
        if due:
            self.restore(due)
        self._arm_timer()

    # -- consumers -------------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        if consumer.browser:
            consumer.snapshot = list(self.backlog)
            consumer.snapshot.reverse()  # popped from the end: the head comes first
        self.consumers.append(consumer)
        self.ever_consumed = True
        if self.lingering:  # resumed within its terminus expiry timeout
            self.host.lingering.cancel(self)
        self._consumers_changed()

    def remove_consumer(self, consumer: Consumer, attempted: bool = False) -> None:
        """The consumer's unsettled messages go back to the queue in their original order;
        its message groups are free for the others. `attempted` (its connection failed): each
        counts as a delivery attempt, as a `modified{delivery-failed}` does."""
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        self._consumers_changed()
        # Its groups are free now: every consumer looks at the parked messages again.
        self.backlog.parked.positions.clear()
        if self.groups:
            self.groups = {g: c for g, c in self.groups.items() if c is not consumer}
        back = list(consumer.in_flight)
        consumer.in_flight.clear()
        for ref in back:
            ref.consumer = None
            self.delivering -= 1
            if not attempted:
                ref.delivery_count -= 1  # given back: not an attempt
                ref.returned = True  # but delivered before: marked redelivered next time
        if attempted:
            self._attempts_failed(back)
        else:
            self.restore(back)
        self.host.queue_idle_check(self)

    def _consumers_changed(self) -> None:
        consumers = [c for c in self.consumers if not c.browser]
        self._browsers = len(consumers) != len(self.consumers)
        owner = None
        if consumers and (self.exclusive or any(c.exclusive for c in consumers)):
            owner = next((c for c in consumers if c.exclusive), consumers[0])
        self._owner = owner
        self._plain = (owner is None and not self._browsers and not self._groups_seen
                       and all(c.selector is None for c in consumers)
                       and len({c.priority for c in consumers}) <= 1)
        if self.selector_aware:
            self._refresh_selector_filter()
        if self.consumers:
            self.host.schedule(self)

    def _refresh_selector_filter(self) -> None:
        """A selector-aware queue (virtual topics) takes only what one of its consumers'
        selectors matches; with the selector cache, what any remembered selector matches."""
        consumers = [c for c in self.consumers if not c.browser]
        if self.extra.get("selector_cache"):
            remembered = self.extra.setdefault("selectors", [])
            new = [c.selector_text or "TRUE" for c in consumers if (c.selector_text or "TRUE") not in remembered]
            if new:
                remembered.extend(new)
                self.host.persist_queue(self)
            compile_filter = self.host.compile_filter
            assert compile_filter is not None, "a selector cache needs the post office's compile_filter"
            predicates = [None if t == "TRUE" else compile_filter(t) for t in remembered]
        else:
            predicates = [c.selector for c in consumers]
        checks = [p for p in predicates if p is not None]
        if not predicates:
            self.filter = _take_nothing
        elif len(checks) < len(predicates):  # one of them takes everything
            self.filter = None
        else:
            self.filter = lambda m: any(p(m) for p in checks)

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.host.flow.account(self.address, -self.size, -self.held)
        self.size = 0
        self.held = 0
        self.backlog.clear()
        self.scheduled.clear()
        if self.paged and not self.stores and self.host.spool is not None:
            self.host.spool.drop(self.name)
        self.paged = 0



__all__ = ["Queue", "Ref", "Consumer", "GROUP_CLOSE", "MAX_GROUPS", "SCAN_BUDGET", "PAGE_WINDOW",
           "PAGE_RETRY_MS", "PAGE_MEMORY_SHARE"]
