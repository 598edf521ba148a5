"""A message on a queue (`Ref`) and a link taking messages from a queue (`Consumer`)."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from .message import Message
from .selectable import CountingSelector

if TYPE_CHECKING:
    from .queue import Queue


class Ref:
    """One message on one queue: a multicast message is shared, each queue counts its own
    deliveries."""

    __slots__ = ("message", "queue", "delivery_count", "consumer", "refused_by", "durable", "paged",
                 "in_level", "parked_token", "returned")

    def __init__(self, message: Message, queue: Queue, delivery_count: int = 0):
        self.message = message
        self.queue = queue
        self.delivery_count = delivery_count
        self.consumer: Consumer | None = None
        self.refused_by: set[int] | None = None  # consumers that said undeliverable-here
        self.durable = queue.stores and message.durable
        self.paged = False  # sent to the store only (page policy), not kept in memory
        self.in_level = 0  # backlog.OUT / LIVE / DEAD: its place in the backlog's FIFOs
        self.parked_token = 0  # its live entry among the backlog's parked refs (0: none)
        # Given back by a consumer that closed cleanly: not a failed attempt (delivery_count is
        # not raised), but delivered before, so the next delivery is marked redelivered (contract,
        # "Guarantees"; STOMP's `redelivered` reads it).
        self.returned = False

    def __lt__(self, other: Ref) -> bool:
        return self.message.id < other.message.id

    def __repr__(self) -> str:
        return f"<Ref {self.message.id} on {self.queue.name} count={self.delivery_count}>"


_consumer_ids = itertools.count(1)


class Consumer:
    """A link taking messages from a queue. `credit` is kept in step with the link by the
    adapter; `blocked` is set while the connection cannot take more output."""

    __slots__ = ("id", "queue", "link", "credit", "selector", "selector_text", "browser", "priority",
                 "in_flight", "blocked", "snapshot", "exclusive", "owner", "selector_counts")

    def __init__(self, queue: Queue, link, selector=None, browser: bool = False, priority: int = 0,
                 owner: object = None, selector_text: str | None = None, exclusive: bool = False):
        self.id = next(_consumer_ids)
        self.queue = queue
        self.link = link
        self.credit = 0
        self.selector = selector  # predicate over a Message, or None
        # A selector naming JMSRedelivered / JMSXDeliveryCount also takes the ref's count.
        self.selector_counts = isinstance(selector, CountingSelector)
        self.selector_text = selector_text
        self.browser = browser
        self.priority = priority
        self.in_flight: dict[Ref, None] = {}
        self.blocked = False
        self.snapshot: list[Ref] | None = None  # a browser's view of the queue when it attached
        self.exclusive = exclusive  # ActiveMQ's consumer.exclusive=true: takes everything
        self.owner = owner

    @property
    def ready(self) -> bool:
        return self.credit > 0 and not self.blocked and not self.browser

    def accepts(self, ref: Ref) -> bool:
        if ref.refused_by is not None and self.id in ref.refused_by:
            return False
        return self.selector is None or self.matches(ref)

    def matches(self, ref: Ref) -> bool:
        """Whether the selector takes `ref` (it has one)."""
        if self.selector_counts:
            return self.selector(ref.message, ref.delivery_count)
        return self.selector(ref.message)

    def __repr__(self) -> str:
        return f"<Consumer {self.id} on {self.queue.name}>"
