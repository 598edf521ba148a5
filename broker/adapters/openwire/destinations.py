"""OpenWire destinations -> the address model (contract, "Names"): a queue `Q` is an anycast
send to / consume from address `Q`, a topic `T` multicast on `T`; `a::q` names a queue (FQQN);
`a,b,topic://c` is a client-side composite (each part takes the composite's kind unless it says
`queue://` or `topic://`); temporary destinations are addresses named by the client."""
from __future__ import annotations

from dataclasses import dataclass

from ...core import limits
from ...core.address import split_fqqn
from ...core.message import ANYCAST, MULTICAST
from ...openwire import model
from .errors import INVALID_DESTINATION, Refusal

_PREFIXES = (("queue://", ANYCAST), ("topic://", MULTICAST), ("temp-queue://", ANYCAST),
             ("temp-topic://", MULTICAST))


@dataclass(frozen=True, slots=True)
class Target:
    address: str
    routing_type: str
    queue: str | None = None  # an FQQN's queue
    temporary: bool = False


def routing_type_of(d: model.Destination) -> str:
    return MULTICAST if isinstance(d, (model.Topic, model.TempTopic)) else ANYCAST


def targets(d: model.Destination | None) -> list[Target]:
    """The parts a destination names (one, unless it is a composite); refuses a missing or
    empty name and names over the contract's limits."""
    if d is None or not d.physical_name:
        raise Refusal(INVALID_DESTINATION, "no destination")
    name = d.physical_name
    rt = routing_type_of(d)
    temporary = isinstance(d, (model.TempQueue, model.TempTopic))
    if "," not in name:
        return [_target(name, rt, temporary)]
    limits.check_composite_length(name)
    parts = list(dict.fromkeys(p.strip() for p in name.split(",") if p.strip()))
    limits.check_composite_parts(len(parts))
    return [_target(p, rt, temporary) for p in parts]


def _target(raw: str, rt: str, temporary: bool) -> Target:
    for prefix, prefix_rt in _PREFIXES:
        if raw.startswith(prefix):
            raw, rt = raw[len(prefix):], prefix_rt
            temporary = temporary or prefix.startswith("temp-")
            break
    address, queue = split_fqqn(raw)
    if not address:
        raise Refusal(INVALID_DESTINATION, f"empty destination name {raw!r}")
    limits.check_name(address)
    limits.check_name(queue, "queue")
    return Target(address, rt, queue, temporary)


def destination_for(address: str, rt: str, temporary: bool = False) -> model.Destination:
    if rt == MULTICAST:
        return model.TempTopic(address) if temporary else model.Topic(address)
    return model.TempQueue(address) if temporary else model.Queue(address)


__all__ = ["Target", "destination_for", "routing_type_of", "targets"]
