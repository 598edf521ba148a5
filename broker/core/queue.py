"""Queue: the messages waiting on one queue, its consumers, and dispatch between them.

Waiting messages are kept by priority (`backlog.Backlog`); messages not due yet (scheduled
delivery, redelivery delay) wait in a `backlog.Schedule`. Dispatch runs once per reactor turn
for every queue that changed (`PostOffice.schedule`) and hands messages to consumers with
credit:

- round-robin among the consumers of the highest consumer priority that can take the message;
  a consumer's selector filters what that consumer takes (others still get what it skips);
- a message group (`group-id`) sticks to the consumer that got its first message until the
  group is closed (sequence -1) or the consumer leaves; new groups go round-robin;
- an exclusive queue (or a consumer with `consumer.exclusive=true`) gives everything to one
  consumer; the next in attach order takes over when it goes;
- expired messages are never delivered: they move to the expiry address.

When no consumer uses any of that, a fast path pops and delivers with no per-message checks
beyond expiry. A consumer's link (the protocol adapter) implements `send(consumer, ref)`;
outcomes come back as `acknowledge`, `release`, `reject`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from . import ports
from .backlog import Backlog, Schedule
from .consumer import Consumer, Ref
from .address import QueuePurpose
from .message import ANYCAST, Message

if TYPE_CHECKING:
    from .address import Address
    from .postoffice import PostOffice

Done = Callable[[BaseException | None], None]
log = logging.getLogger("hermod.core")

GROUP_CLOSE = (-1, 0xFFFFFFFF)  # group-sequence read as signed 32-bit: -1 closes the group
MAX_GROUPS = 10_000  # message groups remembered per queue (group -> consumer)
PAGE_WINDOW = 1000  # messages of a paging queue kept in memory (waiting or out with consumers)
PAGE_RETRY_MS = (100, 30_000)  # a failed page read is tried again after this (doubling) delay
PAGE_MEMORY_SHARE = 0.8  # no paging in while the broker's messages use this share of its limit
# Messages a selector/group dispatch pass looks at before it lets the loop serve others (it
# carries on at the next turn): a new selector over a million-message backlog never freezes it.
SCAN_BUDGET = 1000


def _take_nothing(message: Message) -> bool:
    return False


class Queue:
    def __init__(self, postoffice: PostOffice, name: str, address: Address, routing_type: str = ANYCAST, *,
                 durable: bool = True, filter=None, filter_text: str | None = None,
                 max_consumers: int = -1, exclusive: bool = False, last_value_key: str | None = None,
                 auto_created: bool = False, purpose: str = QueuePurpose.CONFIGURED, temporary: bool = False,
                 extra: dict | None = None):
        self.postoffice = postoffice
        self.name = name
        self.address = address
        self.routing_type = routing_type
        self.durable = durable and not temporary
        # Its durable messages go to the store (a durable queue, and a store that persists).
        self.stores = self.durable and postoffice.journal.durable
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
        # Annotations added to each message as it goes out (a virtual topic's queue records
        # the topic a message came from, as ActiveMQ Classic's copies do).
        self.outbound_annotations: dict | None = (
            {"x-opt-ORIG-ADDRESS": address.name} if purpose == QueuePurpose.VIRTUAL_TOPIC else None)
        self.backlog = Backlog()
        self.scheduled = Schedule()
        self._timer = None
        self._timer_due = 0
        self.consumers: list[Consumer] = []
        self.groups: dict[object, Consumer] = {}
        self._last_values: dict[object, Ref] = {}
        self._groups_seen = False
        self._owner: Consumer | None = None  # exclusive: the one consumer that receives
        self._plain = True
        self._browsers = False
        self._turn = 0
        self._resume = None  # a dispatch pass that ran out of SCAN_BUDGET carries on here
        self.delivering = 0
        self.added = 0
        self.acked = 0
        self.expired = 0
        self.size = 0  # bytes of messages on this queue in memory (waiting, scheduled, delivering)
        self.held = 0  # refs of this queue in memory (their overhead counts against the limit)
        self.paged = 0  # messages in the store only (page policy); -1: unknown, read until empty
        self._cursor = 0  # highest message id this queue has had in memory
        self._reading = False
        self._page_retry_ms = 0  # delay before the next try after a failed page read
        self.deleted = False
        self.pending = 0  # refs posted through the journal, not yet on the queue (no auto-delete)
        self.ever_consumed = False
        self.lingering = False  # no consumer, kept for its terminus expiry (core.lingering)
        self.persisted = True  # False while its creation is on its way to the store
        self._persist_waiters: list = []

    # -- state ---------------------------------------------------------------------------------
    @property
    def message_count(self) -> int:
        """Messages on the queue, including scheduled, paged, and out with consumers."""
        return len(self.backlog) + len(self.scheduled) + self.delivering + max(self.paged, 0)

    @property
    def idle(self) -> bool:
        return not self.backlog and not self.scheduled and not self.delivering and not self.paged

    def record(self) -> ports.QueueRecord:
        return ports.QueueRecord(
            name=self.name, address=self.address.name, routing_type=self.routing_type,
            filter=self.filter_text, max_consumers=self.max_consumers, exclusive=self.exclusive,
            last_value_key=self.last_value_key, auto_created=self.auto_created,
            purpose=self.purpose, extra=dict(self.extra))

    def accepts(self, message: Message) -> bool:
        return self.filter is None or self.filter(message)

    def waiting(self) -> list[Ref]:
        """Every ref not out with a consumer, in dispatch order (then the scheduled ones)."""
        return [*self.backlog, *sorted(self.scheduled)]

    def when_persisted(self, callback) -> None:
        """`callback(queue, error)` once the store has the queue (at once if it has)."""
        if self.persisted:
            callback(self, None)
        else:
            self._persist_waiters.append(callback)

    def stored(self, error: BaseException | None) -> None:
        self.persisted = error is None
        waiters, self._persist_waiters = self._persist_waiters, []
        for callback in waiters:
            callback(self, error)

    # -- messages in -----------------------------------------------------------------------------
    def enqueue(self, ref: Ref) -> None:
        self.added += 1
        message = ref.message
        if message.id > self._cursor:
            self._cursor = message.id
        self._account(message.size, 1)
        if self.last_value_key is not None:
            self._replace_last_value(ref)
        if not self._groups_seen and message.group_id is not None:
            self._groups_seen = True
            self._plain = False
        due = message.scheduled_time
        if due and due > self.postoffice.clock.now_ms():
            self.scheduled.add(due, ref)
            self._arm_timer()
            return
        self.backlog.append(ref)
        if self.consumers:
            self.postoffice.schedule(self)

    def page_out(self, ref: Ref) -> None:
        """Page policy: the ref is in the store (or the spool) only; read back when the window
        drains. Raises OSError when the spool cannot keep it (nothing changed then)."""
        if not self.stores:
            po = self.postoffice
            if po.spool is None:
                raise OSError(f"queue {self.name}: no spool to page to")
            po.spool.append(self.name, ports.StoredReference(po.message_record(ref.message),
                                                             ref.delivery_count))
        self.added += 1
        if self.paged >= 0:
            self.paged += 1

    def _page_in(self) -> None:
        """Read the next window of paged messages when the one in memory runs low. What is in
        memory counts messages out with consumers too, so a consumer with endless credit that
        never settles cannot page a whole queue in; nor does paging in go past the broker's
        memory limit (it waits for memory to be released)."""
        if self._reading or not self.paged or self.deleted or self.held >= PAGE_WINDOW // 2:
            return
        po = self.postoffice
        room = po.flow.memory_limit * PAGE_MEMORY_SHARE - po.memory_used
        if room <= 0:
            po.flow.wait(self, self._page_in)  # called again once messages leave memory
            return
        limit = PAGE_WINDOW - self.held
        if self.held:  # by the size of what is in memory, as many as fit in the room left
            limit = max(1, min(limit, int(room // (self.size / self.held + po.ref_overhead))))
        self._reading = True
        if self.stores:
            po.journal.read_page(self.name, self._cursor, limit,
                                 lambda stored: self._paged_in(stored, limit))
            return
        try:
            stored = [] if po.spool is None else po.spool.read(self.name, limit)
        except OSError as error:
            self._paged_in(error)
            return
        self._paged_in(stored, limit)

    def _page_in_later(self, error: BaseException) -> None:
        """A page read failed: the messages are still where they were paged to; try again."""
        delay = self._page_retry_ms = min(max(self._page_retry_ms * 2, PAGE_RETRY_MS[0]),
                                          PAGE_RETRY_MS[1])
        log.error("queue %s: paging in failed (%s); trying again in %.1f s", self.name, error,
                  delay / 1000)
        po = self.postoffice
        po.call_at(po.clock.now_ms() + delay, self._page_in)

    def _paged_in(self, stored: list | BaseException, limit: int | None = None) -> None:
        self._reading = False
        if self.deleted:
            return
        if isinstance(stored, BaseException):
            self._page_in_later(stored)
            return
        self._page_retry_ms = 0
        if not stored:
            self.paged = 0  # nothing more in the store
            return
        make = self.postoffice.message_from_record
        assert make is not None, "PostOffice.recover() sets message_from_record before any paging"
        for s in stored:
            ref = Ref(make(s.message), self, s.delivery_count)
            ref.durable = self.stores
            self.paged -= 1 if self.paged > 0 else 0
            self.recover(ref)
        if self.paged == 0 and (limit is None or len(stored) >= limit):
            self.paged = -1  # more than we counted (after a restart): keep reading
        self._page_in()

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
            self.postoffice.schedule(self)

    def _account(self, size: int, refs: int) -> None:
        self.size += size
        self.held += refs
        self.postoffice.account(self.address, size, refs)

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
                self.postoffice.journal.submit([ports.DeleteReference(self.name, old.message.id)], None)

    def _forget(self, ref: Ref) -> None:
        """The ref has left the queue for good (acknowledged, replaced, moved)."""
        self._account(-ref.message.size, -1)
        if self.last_value_key is not None:
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
        self._timer = self.postoffice.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.deleted:
            return
        due = self.scheduled.pop_due(self.postoffice.clock.now_ms())
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
            self.postoffice.lingering.cancel(self)
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
        if attempted:
            self._attempts_failed(back)
        else:
            self.restore(back)
        self.postoffice.queue_idle_check(self)

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
            self.postoffice.schedule(self)

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
            compile_filter = self.postoffice.compile_filter
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

    # -- dispatch --------------------------------------------------------------------------------
    def dispatch(self) -> None:
        if self.paged:
            self._page_in()
        if not self.consumers:
            return
        if self.backlog:
            if self._plain and not self.backlog.parked.live:
                self._dispatch_plain()
            else:
                self._dispatch_general()
        if self._browsers:
            for c in self.consumers:
                if c.browser and c.snapshot:
                    self._browse(c)

    def _next_ready(self) -> Consumer | None:
        consumers = self.consumers
        n = len(consumers)
        turn = self._turn
        for i in range(n):
            c = consumers[(turn + i) % n]
            if c.credit > 0 and not c.blocked:
                self._turn = (turn + i + 1) % n
                return c
        return None

    def _dispatch_plain(self) -> None:
        """Every consumer takes every message: pop and deliver round-robin."""
        backlog = self.backlog
        now = 0
        while backlog.live:
            c = self._next_ready()
            if c is None:
                return
            ref = backlog.popleft()
            try:
                expiration = ref.message.expiration
                if expiration:
                    now = now or self.postoffice.clock.now_ms()
                    if expiration <= now:
                        self._expire(ref)
                        continue
            except Exception:  # noqa: BLE001 - one message's fault: the general pass keeps it
                log.exception("message %s on %s: dispatch check failed", ref.message.id, self.name)
                backlog.restore([ref])
                self._dispatch_general()
                return
            if ref.refused_by is not None and c.id in ref.refused_by:
                backlog.restore([ref])
                self._dispatch_general()
                return
            self._deliver(c, ref)

    def _dispatch_general(self) -> None:
        """Selectors, groups, priorities, exclusivity: each message picks its consumer. A message
        no ready consumer takes is parked; each consumer looks through the parked ones from
        where it stopped. At most SCAN_BUDGET messages are looked at per pass."""
        backlog = self.backlog
        now = self.postoffice.clock.now_ms()
        candidates = [self._owner] if self._owner is not None else [c for c in self.consumers if not c.browser]
        budget = self._dispatch_parked(candidates, now, SCAN_BUDGET) if backlog.parked.live else SCAN_BUDGET
        while backlog.live and budget > 0 and any(c.credit > 0 and not c.blocked for c in candidates):
            budget -= 1
            ref = backlog.popleft()
            try:
                expiration = ref.message.expiration
                if expiration and expiration <= now:
                    self._expire(ref)
                    continue
                c = self._choose(ref, candidates)
            except Exception:  # noqa: BLE001 - one message's fault must not lose it or the others
                log.exception("message %s on %s: dispatch check failed; it stays queued",
                              ref.message.id, self.name)
                c = None
            if c is None:
                self._park(ref, candidates)
                continue
            self._deliver(c, ref)
        if budget <= 0:
            self._carry_on()

    def _park(self, ref: Ref, candidates: list[Consumer]) -> None:
        """Park a ref no ready consumer took; a consumer that has seen every parked ref and
        turns this one down too need never look at it (those that would take it, once they
        have credit, still will)."""
        parked = self.backlog.parked
        at = self.backlog.park(ref)
        positions = parked.positions
        for c in candidates:
            if parked.position(c.id) == at and not self._takes(c, ref):
                positions[c.id] = at + 1

    def _takes(self, c: Consumer, ref: Ref) -> bool:
        try:
            group = ref.message.group_id if self._groups_seen else None
            if group is not None:
                holder = self.groups.get(group)
                if holder is not None and holder is not c:
                    return False
            return c.accepts(ref)
        except Exception:  # noqa: BLE001 - a message a check fails on stays parked, not lost
            log.exception("message %s on %s: consumer check failed", ref.message.id, self.name)
            return False

    def _dispatch_parked(self, candidates: list[Consumer], now: int, budget: int) -> int:
        """Each ready consumer takes what it accepts among the parked refs it has not seen yet."""
        parked = self.backlog.parked
        positions = parked.positions
        for c in sorted(candidates, key=lambda c: -c.priority):
            while budget > 0 and c.credit > 0 and not c.blocked:
                pos = parked.position(c.id)
                if pos >= parked.end:
                    break
                ref = parked.at(pos)
                # Recorded before anything leaves: removing may compact the parked refs, which
                # moves every consumer's position along with them.
                positions[c.id] = pos + 1
                if ref is None:
                    continue
                budget -= 1
                expiration = ref.message.expiration
                if expiration and expiration <= now:
                    self._expire(ref)  # leaves the parked refs (take)
                    continue
                if self._takes(c, ref):
                    parked.remove(ref)
                    group = ref.message.group_id if self._groups_seen else None
                    if group is not None:
                        self._assign_group(group, c)
                    self._deliver(c, ref)
            if budget <= 0:
                break
        return budget

    def _carry_on(self) -> None:
        """Continue dispatch at a later loop turn, letting other connections be served."""
        if self._resume is not None:
            return
        po = self.postoffice

        def resume() -> None:
            self._resume = None
            if not self.deleted:
                po.schedule(self)

        self._resume = po.call_at(po.clock.now_ms(), resume)

    def _choose(self, ref: Ref, candidates: list[Consumer]) -> Consumer | None:
        group = ref.message.group_id if self._groups_seen else None
        if group is not None:
            holder = self.groups.get(group)
            if holder is not None:
                return holder if holder.credit > 0 and not holder.blocked and holder.accepts(ref) else None
        n = len(candidates)
        turn = self._turn % n if n else 0
        best = None
        best_i = 0
        for i in range(n):
            c = candidates[(turn + i) % n]
            if c.credit > 0 and not c.blocked and (best is None or c.priority > best.priority) and c.accepts(ref):
                best, best_i = c, i
        if best is None:
            return None
        self._turn = (turn + best_i + 1) % max(n, 1)
        if group is not None:
            self._assign_group(group, best)
        return best

    def _assign_group(self, group, consumer: Consumer) -> None:
        groups = self.groups
        if group in groups:
            return
        if len(groups) >= MAX_GROUPS:
            # Bounded: the oldest assignment goes (its next message may pick another
            # consumer; only with more than MAX_GROUPS groups at once).
            del groups[next(iter(groups))]
        groups[group] = consumer

    def _deliver(self, c: Consumer, ref: Ref) -> None:
        ref.delivery_count += 1
        ref.consumer = c
        c.in_flight[ref] = None
        c.credit -= 1
        self.delivering += 1
        if self._groups_seen:
            message = ref.message
            if message.group_id is not None and message.group_sequence in GROUP_CLOSE:
                self.groups.pop(message.group_id, None)
        c.link.send(c, ref)

    def _browse(self, c: Consumer) -> None:
        snapshot = c.snapshot
        while snapshot and c.credit > 0 and not c.blocked:
            ref = snapshot.pop()
            if c.selector is not None and not c.matches(ref):
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
        self._forget(ref)
        po = self.postoffice
        po.delivery_latency.observe_ms(po.clock.now_ms() - ref.message.arrival)
        ops: list[ports.Operation] = [ports.DeleteReference(self.name, ref.message.id)] if ref.durable else []
        if po.retaining:
            sent_to = po.addresses.get(ref.message.address)
            if sent_to is not None and sent_to.retains:
                ops.append(ports.RecordAcknowledged(ref.message.id, self.name, po.clock.now_ms()))
        if ops:
            po.journal.submit(ops, done)
        elif done is not None:
            done(None)
        if self.idle:
            self.postoffice.queue_idle_check(self)

    def put_back(self, ref: Ref, acked: bool) -> None:
        """An acknowledgement (or dead-letter move) the store could not commit: the message is
        on the queue again, as it still is in the store."""
        if self.deleted:
            return
        if acked:
            self.acked -= 1
        self._account(ref.message.size, 1)
        ref.delivery_count -= 1
        self.restore([ref])

    def release(self, ref: Ref, *, failed: bool = False, undeliverable: bool = False,
                annotated: Message | None = None) -> None:
        """Released / modified: back to the queue. `failed` counts the attempt (delivery-failed)
        and applies the redelivery delay; `undeliverable` keeps it from this consumer;
        `annotated` is the message with a modified outcome's annotations merged in (see
        `_take_version`), due again at its `x-opt-delivery-time` if it names a later one."""
        c = self._settle_out(ref)
        if undeliverable and c is not None:
            if ref.refused_by is None:
                ref.refused_by = set()
            ref.refused_by.add(c.id)
        if annotated is not None:
            self._take_version(ref, annotated)
        if not failed:
            ref.delivery_count -= 1
            if not self._due_later(ref):
                self.restore([ref])
            return
        self._attempts_failed([ref])

    def _take_version(self, ref: Ref, message: Message) -> None:
        """From now on this queue's ref carries `message`, a new version of its message (other
        queues keep theirs). It gets a new id, so the store keeps the versions apart: the new
        one is stored and referenced, the old reference dropped, in one unit. Queue order is
        by id, so it goes back behind the messages waiting (as a message sent again would)."""
        old = ref.message
        message.id = self.postoffice.next_message_id()
        message.hops = old.hops
        self._account(message.size - old.size, 0)
        ref.message = message
        if ref.durable:
            po = self.postoffice
            po.journal.submit([ports.AddMessage(po.message_record(message)),
                               ports.AddReference(self.name, message.id, ref.delivery_count),
                               ports.DeleteReference(self.name, old.id)], None)

    def _due_later(self, ref: Ref, not_before: int = 0) -> bool:
        """Schedule `ref` when it is not due yet (its message's delivery time, or `not_before`,
        is later than now); False when it is due now."""
        now = self.postoffice.clock.now_ms()
        due = max(ref.message.scheduled_time, not_before)
        if due <= now:
            return False
        self.scheduled.add(due, ref)
        self._arm_timer()
        return True

    def take_back_waiting(self, ref: Ref) -> bool:
        """Take `ref` off the queue if it waits there (its consumer's link went, and nobody
        has it since): a recovering receiver reports it settled (AMQP link recovery). False
        when it is out with a consumer again, or gone."""
        if self.deleted or ref.queue is not self or ref.consumer is not None:
            return False
        return self.backlog.remove(ref) or self.scheduled.remove(ref)

    def _attempts_failed(self, refs: list[Ref]) -> None:
        """Refs back from failed deliveries (counted): dead-lettered at max_delivery_attempts,
        else their count stored and the redelivery delay applied."""
        po = self.postoffice
        settings = po.settings_for(self.address.name)
        back: list[Ref] = []
        for ref in refs:
            if 0 < settings.max_delivery_attempts <= ref.delivery_count:
                po.dead_letter(ref, reason="max-delivery-attempts")
                continue
            if ref.durable:
                po.journal.submit([ports.SetDeliveryCount(self.name, ref.message.id, ref.delivery_count)], None)
            delay = settings.redelivery_delay_ms
            if not self._due_later(ref, po.clock.now_ms() + delay if delay > 0 else 0):
                back.append(ref)
        self.restore(back)

    def reject(self, ref: Ref, done: Done | None = None) -> None:
        """Rejected: straight to the dead-letter address, no retry (Artemis)."""
        self._settle_out(ref)
        self.postoffice.dead_letter(ref, reason="rejected", done=done)

    def take(self, ref: Ref) -> None:
        """Take a ref off the queue for good (dead-lettering, expiry)."""
        if ref.consumer is None:
            self.backlog.remove(ref) or self.scheduled.remove(ref)
        self._forget(ref)

    def _expire(self, ref: Ref) -> None:
        self.expired += 1
        self.postoffice.expire(ref)

    def expire_due(self, now: int) -> int:
        """The periodic expiry scan: move every waiting expired message out."""
        moved = 0
        for ref in self.waiting():
            try:
                if 0 < ref.message.expiration <= now:
                    self._expire(ref)
                    moved += 1
            except Exception:  # noqa: BLE001 - one message's fault must not stop the scan
                log.exception("message %s on %s: expiry check failed", ref.message.id, self.name)
        return moved

    def take_waiting(self, predicate) -> list[Ref]:
        """Take every waiting ref (not out with a consumer) that `predicate` holds for off the
        queue, in queue order, in one pass; the caller deletes or re-homes them (management
        purge and move)."""
        taken = self.backlog.remove_where(predicate) + sorted(self.scheduled.remove_where(predicate))
        for ref in taken:
            self._forget(ref)
        return taken

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.postoffice.account(self.address, -self.size, -self.held)
        self.size = 0
        self.held = 0
        self.backlog.clear()
        self.scheduled.clear()
        if self.paged and not self.stores and self.postoffice.spool is not None:
            self.postoffice.spool.drop(self.name)
        self.paged = 0


__all__ = ["Queue", "Ref", "Consumer"]
