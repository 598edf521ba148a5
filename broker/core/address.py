"""Addresses: a name, a set of routing types, and the queues bound to it.

All anycast queues of an address share one turn (a message goes to one of them, round-robin);
every multicast queue gets its own copy. A message with no routing type reaches both kinds.
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from .message import ANYCAST, MULTICAST, Message, RoutingType
from .wildcards import is_wildcard

if TYPE_CHECKING:
    from .queue import Queue

FQQN_SEPARATOR = "::"


class QueuePurpose(enum.StrEnum):
    """Why a queue exists (persisted with it, shown by management; a `str` like RoutingType)."""
    CONFIGURED = "configured"  # the configuration or a management call made it
    AUTO = "auto"  # auto-created for a link or a send
    SUBSCRIPTION = "subscription"  # a topic subscription (durable or shared)
    VIRTUAL_TOPIC = "virtual-topic"  # a virtual topic's consumer-group queue
    TEMPORARY = "temporary"  # a dynamic node
    DEAD_LETTER = "dead-letter"  # made on first use as a dead-letter or expiry target
    COMPOSITE = "composite"  # a composite queue that keeps the original


def split_fqqn(name: str) -> tuple[str, str | None]:
    """`address::queue` -> (address, queue); a plain name -> (name, None)."""
    address, sep, queue = name.partition(FQQN_SEPARATOR)
    return (address, queue) if sep else (name, None)


class Address:
    __slots__ = ("name", "routing_types", "auto_created", "queues", "anycast", "multicast", "_turn",
                 "temporary", "forwarders", "wildcard", "size", "limit", "pages", "retains", "senders")

    def __init__(self, name: str, routing_types: set[str] | frozenset[str], auto_created: bool = False,
                 temporary: bool = False):
        self.name = name
        self.routing_types = set(routing_types)
        self.auto_created = auto_created
        self.temporary = temporary
        self.queues: dict[str, Queue] = {}
        self.anycast: list[Queue] = []
        # Its own multicast queues and wildcard subscriptions' queues, in binding order; a dict so
        # that binding or unbinding one of 100,000 subscriptions costs O(1), not a list scan.
        self.multicast: dict[Queue, None] = {}
        self.forwarders: list = []  # diverts and composites bound here (forwarding.py)
        self.wildcard = is_wildcard(name)
        self.size = 0  # bytes of messages on this address's queues, in memory
        self.limit = -1  # max_size_bytes from the settings (-1: none)
        self.pages = False  # address_full_policy is "page"
        self.retains = False  # retention_days > 0 (and a store to keep them in)
        self.senders = 0  # producer links attached to it: its auto-created queues stay meanwhile
        self._turn = 0

    def bind(self, queue: Queue) -> None:
        self.queues[queue.name] = queue
        if queue.routing_type == ANYCAST:
            self.anycast.append(queue)
        else:
            self.multicast[queue] = None

    def unbind(self, queue: Queue) -> None:
        if self.queues.pop(queue.name, None) is not None:
            if queue.routing_type == ANYCAST:
                self.anycast.remove(queue)
            else:
                self.multicast.pop(queue, None)

    def bind_subscription(self, queue: Queue) -> None:
        """A wildcard subscription's queue (bound to another address) also routes from here."""
        self.multicast[queue] = None

    def unbind_subscription(self, queue: Queue) -> None:
        self.multicast.pop(queue, None)

    def bind_forwarder(self, forwarder) -> None:
        if forwarder not in self.forwarders:
            self.forwarders.append(forwarder)

    @property
    def in_use(self) -> bool:
        return bool(self.queues or self.forwarders)

    def route(self, message: Message, routing_type: str | None, out: list[Queue]) -> None:
        """Append to `out` the queues of this address that take `message`."""
        if routing_type != MULTICAST:
            anycast = self.anycast
            n = len(anycast)
            if n == 1:
                q = anycast[0]
                if q.filter is None or q.filter(message):
                    out.append(q)
            elif n:
                turn = self._turn
                for i in range(n):
                    q = anycast[(turn + i) % n]
                    if q.filter is None or q.filter(message):
                        self._turn = (turn + i + 1) % n
                        out.append(q)
                        break
        if routing_type != ANYCAST:
            for q in self.multicast:
                if q.filter is None or q.filter(message):
                    out.append(q)

    def __repr__(self) -> str:
        return f"<Address {self.name} {sorted(self.routing_types)}>"


__all__ = ["Address", "FQQN_SEPARATOR", "QueuePurpose", "RoutingType", "split_fqqn"]
