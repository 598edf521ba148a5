"""A SEND's or SUBSCRIBE's `destination` as the core's targets (contract, "Names"): the STOMP
prefixes (`/queue/`, `/topic/`, `/temp-queue/`, `/temp-topic/`, `stomp.names`), else
`destination-type` / `subscription-type`, else the broker's `anycast://`-style prefixes and
`queue://` / `topic://`, else the address settings' default (routing None); `address::queue`
(FQQN); client-side composites `a,/topic/b,topic://c` (each part its own target; a part without
a prefix takes the routing of the part before it, as ActiveMQ Classic reads `/queue/a,b`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core import limits
from ...core.address import split_fqqn
from ...protocol.terminus import parse_name, split_composite
from ...stomp import parse_destination

if TYPE_CHECKING:
    from .connection import StompConnection


@dataclass(frozen=True, slots=True)
class Target:
    address: str
    routing: str | None  # "anycast", "multicast", or None: the address settings decide
    queue: str | None = None  # FQQN
    temporary: bool = False  # one of this connection's own temporary destinations


def targets(conn: StompConnection, raw: str | None, destination_type: str | None,
            subscription_type: str | None = None) -> list[Target]:
    """Every target `raw` names (one unless it is a composite). Raises StompError (a bad name
    or routing header) and the core's InvalidField / ResourceLimitExceeded (limits)."""
    parts = [raw or ""]
    if raw and "," in raw:
        parts = split_composite(raw)
    server = conn.broker.config.server
    out: list[Target] = []
    routing: str | None = None
    for part in parts:
        dest = parse_destination(part, destination_type, subscription_type)
        if dest.temporary:
            routing = dest.routing
            out.append(Target(conn.temporaries.address(dest.address, dest.routing or "anycast"), routing,
                              temporary=True))
            continue
        if dest.routing is not None and part != dest.address:  # a STOMP prefix named it
            routing = dest.routing
            address, queue = split_fqqn(dest.address)
            limits.check_name(address)
            limits.check_name(queue, "queue")
        else:
            name = parse_name(dest.address, [], server.anycast_prefixes, server.multicast_prefixes)
            address, queue = name.address, name.queue
            routing = name.routing_type or dest.routing or (routing if len(parts) > 1 else None)
        out.append(Target(address, routing, queue))
    return out


def stomp_name(conn: StompConnection, address: str, routing: str | None) -> str:
    """The STOMP name of `address` for a MESSAGE's `destination` (own temporaries by their N)."""
    own = conn.temporaries.stomp_name(address)
    if own is not None:
        return own
    if routing == "anycast":
        return "/queue/" + address
    if routing == "multicast":
        return "/topic/" + address
    return address
