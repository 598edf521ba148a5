"""Addresses: a name, a set of routing types, and what is bound to it (`bindings.py`: all
anycast queues of an address share one turn, every multicast queue and every divert routes on
its own). Also the routing types, queue purposes and fully qualified queue names (`a::q`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .bindings import Bindings
from .kinds import QueuePurpose, RoutingType
from .wildcards import is_wildcard

if TYPE_CHECKING:
    from .queue import Queue

FQQN_SEPARATOR = "::"


def split_fqqn(name: str) -> tuple[str, str | None]:
    """`address::queue` -> (address, queue); a plain name -> (name, None)."""
    address, sep, queue = name.partition(FQQN_SEPARATOR)
    return (address, queue) if sep else (name, None)


class Address:
    """An address: its routing types, the figures flow control keeps, and its `bindings` (the
    queues and diverts that take what is sent to it, `bindings.py`)."""

    __slots__ = ("name", "routing_types", "auto_created", "queues", "bindings", "temporary",
                 "wildcard", "size", "limit", "pages", "retains", "senders")

    def __init__(self, name: str, routing_types: set[str] | frozenset[str], auto_created: bool = False,
                 temporary: bool = False):
        self.name = name
        self.routing_types = set(routing_types)
        self.auto_created = auto_created
        self.temporary = temporary
        self.bindings = Bindings(name)
        self.queues: dict[str, Queue] = self.bindings.queues  # its own queues by name
        self.wildcard = is_wildcard(name)
        self.size = 0  # bytes of messages on this address's queues, in memory
        self.limit = -1  # max_size_bytes from the settings (-1: none)
        self.pages = False  # address_full_policy is "page"
        self.retains = False  # retention_days > 0 (and a store to keep them in)
        self.senders = 0  # producer links attached to it: its auto-created queues stay meanwhile

    @property
    def in_use(self) -> bool:
        return self.bindings.in_use()

    def __repr__(self) -> str:
        return f"<Address {self.name} {sorted(self.routing_types)}>"

__all__ = ["Address", "FQQN_SEPARATOR", "QueuePurpose", "RoutingType", "split_fqqn"]
