"""STOMP destination names to the address model and back (contract, "Names").

`/queue/Q` is anycast on address Q, `/topic/T` multicast on T (ActiveMQ Classic's names);
`/temp-queue/N` and `/temp-topic/N` are temporary destinations of that connection (the adapter
maps N to the connection's own address). Any other name follows `destination-type` (SEND and
SUBSCRIBE) or Artemis's `subscription-type` (SUBSCRIBE), `ANYCAST` or `MULTICAST`; without them
the routing type is None and the address settings' default decides. The part after a prefix is
passed through untouched: FQQN `address::queue`, composites `a,b,topic://c` and wildcards are the
core's to resolve. A prefix wins over a disagreeing `destination-type`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import StompError

ANYCAST = "anycast"
MULTICAST = "multicast"

_PREFIXES = (("/queue/", ANYCAST, False), ("/topic/", MULTICAST, False),
             ("/temp-queue/", ANYCAST, True), ("/temp-topic/", MULTICAST, True))


@dataclass(frozen=True, slots=True)
class Destination:
    """`address` as the core resolves it; `routing` ANYCAST, MULTICAST or None (settings decide);
    `temporary`: a `/temp-queue/` or `/temp-topic/` name, `address` being its N."""

    address: str
    routing: str | None
    temporary: bool = False


def _routing_type(header: str, value: str | None) -> str | None:
    if value is None:
        return None
    upper = value.strip().upper()
    if upper == "ANYCAST":
        return ANYCAST
    if upper == "MULTICAST":
        return MULTICAST
    raise StompError(f"{header} must be ANYCAST or MULTICAST, not {value[:40]!r}")


def parse_destination(name: str | None, destination_type: str | None = None,
                      subscription_type: str | None = None) -> Destination:
    """The destination of a SEND or SUBSCRIBE (`subscription_type` only for SUBSCRIBE)."""
    if not name:
        raise StompError("a destination header is required")
    declared = _routing_type("destination-type", destination_type)
    if declared is None:
        declared = _routing_type("subscription-type", subscription_type)
    for prefix, routing, temporary in _PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix):]
            if not rest:
                raise StompError(f"destination {name!r} names no {'temporary ' if temporary else ''}"
                                 f"{'queue' if routing == ANYCAST else 'topic'}")
            return Destination(rest, routing, temporary)
    return Destination(name, declared)


def destination_name(address: str, routing: str | None, temporary: bool = False) -> str:
    """The STOMP name of an address (MESSAGE `destination`, `reply-to`): the inverse of
    `parse_destination` for prefixed names; an address of unknown routing is given bare."""
    if routing == ANYCAST:
        return ("/temp-queue/" if temporary else "/queue/") + address
    if routing == MULTICAST:
        return ("/temp-topic/" if temporary else "/topic/") + address
    return address
