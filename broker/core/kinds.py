"""The core's two vocabularies as enums: how an address hands a message to its queues, and
why a queue exists. Both are `str` subclasses, so records, the store, JSON and log lines keep
the plain values; a module of its own so that message, address and copies can all import them
without an import cycle."""
from __future__ import annotations

import enum


class RoutingType(enum.StrEnum):
    """How an address hands a message to its queues: anycast (one queue of the address takes
    it) or multicast (every queue gets a copy). A `str`, so records, the store, JSON and log
    lines keep the plain values."""
    ANYCAST = "anycast"
    MULTICAST = "multicast"


class QueuePurpose(enum.StrEnum):
    """Why a queue exists (persisted with it, shown by management; a `str` like RoutingType)."""
    CONFIGURED = "configured"  # the configuration or a management call made it
    AUTO = "auto"  # auto-created for a link or a send
    SUBSCRIPTION = "subscription"  # a topic subscription (durable or shared)
    VIRTUAL_TOPIC = "virtual-topic"  # a virtual topic's consumer-group queue
    TEMPORARY = "temporary"  # a dynamic node
    DEAD_LETTER = "dead-letter"  # made on first use as a dead-letter or expiry target
    COMPOSITE = "composite"  # a composite queue that keeps the original


__all__ = ["QueuePurpose", "RoutingType"]
