"""What one queue holds: its attributes, its messages (waiting, scheduled, out with consumers,
paged), its consumers and its counters, and the read-only views of them.

`Queue` (queue.py) is this state plus its behaviour, one module per concern: messages in,
timers and consumers in queue.py, dispatch in dispatch.py, paging in paging.py, outcomes
(acknowledge, release, redelivery, dead letters and expiry) in outcomes.py. Those are mixins
over `QueueState`; the methods they call on each other are declared here for the type checker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .kinds import QueuePurpose
from . import ports
from .backlog import Backlog, Schedule
from .consumer import Consumer, Ref
from .message import ANYCAST, Message

if TYPE_CHECKING:
    from .address import Address


class QueueState:
    # Slots, not a __dict__: a queue has ~50 fields, past what a shared-key dict holds, so each
    # queue's dict was ~1.6 KB of its own (100,000 subscriptions: 160 MB). Every field is set in
    # __init__ below; a new one goes in this list too (the mixins and Queue add no fields).
    __slots__ = ("_browsers", "_cursor", "_groups_seen", "_last_values", "_owner", "_page_retry_ms",
                 "_persist_waiters", "_plain", "_reading", "_resume", "_timer", "_timer_due", "_turn",
                 "acked", "added", "address", "auto_created", "backlog", "consumers", "deleted",
                 "delivered", "delivering", "dirty", "durable", "ever_consumed", "exclusive", "expired", "extra",
                 "filter", "filter_text", "groups", "held", "host", "in_doubt", "last_value_key", "lingering",
                 "max_consumers", "name", "outbound_annotations", "paged", "pending", "persisted",
                 "purpose", "routing_type", "scheduled", "selector_aware", "size", "stores", "temporary")

    def __init__(self, host: ports.QueueHost, name: str, address: Address, routing_type: str = ANYCAST, *,
                 durable: bool = True, filter=None, filter_text: str | None = None,
                 max_consumers: int = -1, exclusive: bool = False, last_value_key: str | None = None,
                 auto_created: bool = False, purpose: str = QueuePurpose.CONFIGURED, temporary: bool = False,
                 extra: dict | None = None):
        self.host = host  # the post office, seen through what a queue needs of it (ports.QueueHost)
        self.name = name
        self.address = address
        self.routing_type = routing_type
        self.durable = durable and not temporary
        # Its durable messages go to the store (a durable queue, and a store that persists).
        self.stores = self.durable and host.journal.durable
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
        self.dirty = False  # marked for this turn's dispatch (`PostOffice.schedule`)
        self.groups: dict[object, Consumer] = {}
        self._last_values: dict[object, Ref] = {}
        self._groups_seen = False
        self._owner: Consumer | None = None  # exclusive: the one consumer that receives
        self._plain = True
        self._browsers = False
        self._turn = 0
        self._resume = None  # a dispatch pass that ran out of SCAN_BUDGET carries on here
        self.delivering = 0
        # Message ids a restored prepared transaction acknowledged but recovery did not read
        # (beyond its window): id -> who takes the ref when paging reads it (transactions.py).
        self.in_doubt: dict[int, Callable[[Ref], None]] | None = None
        self.delivered = 0  # deliveries to consumers, redeliveries included; never goes down
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
        # The integer first: asked after every acknowledgement, and under load something is
        # nearly always out with a consumer (Backlog and Schedule answer through Python calls).
        return not self.delivering and not self.backlog and not self.scheduled and not self.paged

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

    if TYPE_CHECKING:  # implemented by Queue and its mixins (see the module docstring)
        def enqueue(self, ref: Ref) -> None: ...
        def recover(self, ref: Ref) -> None: ...
        def restore(self, refs: list[Ref]) -> None: ...
        def _account(self, size: int, refs: int) -> None: ...
        def _forget(self, ref: Ref) -> None: ...
        def _forget_last_value(self, ref: Ref) -> None: ...
        def _arm_timer(self) -> None: ...
        def _page_in(self) -> None: ...
        def _expire(self, ref: Ref) -> None: ...
