"""Forwarding bindings: Artemis diverts and ActiveMQ Classic composite destinations, one mechanism.

A `Forwarder` is bound to an address like a queue is. When a message is routed to that address,
each matching entry of the forwarder gets a copy of the message (new id, `x-opt-ORIG-*`
annotations, routing type rewritten as the entry says), and the copy is routed again to the
entry's address, so targets may themselves forward. Whether the address's own queues still get
the original is the forwarder's `keeps_original` rule:

- divert, exclusive: only when it did not fire; non-exclusive: always;
- composite: when `forward_only` is false, or when nothing matched and `send_when_not_matched`.

Evaluation on one address (Artemis order): every exclusive forwarder whose filter matches fires;
if any of them says the original is not kept, nothing else on the address gets it; otherwise
the non-exclusive forwarders fire and the address's queues take it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import logging
from typing import TYPE_CHECKING, Callable

from .copies import plan_copy
from .errors import HermodError
from .message import ANYCAST, MULTICAST, Message

if TYPE_CHECKING:
    from .postoffice import PostOffice

log = logging.getLogger("hermod.core")

MAX_FORWARD_HOPS = 16  # a message forwarded more often is in a cycle: dead-lettered instead

Predicate = Callable[[Message], bool]

# How an entry sets the routing type of its copy.
FORCE_ANYCAST, FORCE_MULTICAST, PASS, STRIP = "anycast", "multicast", "pass", "strip"


@dataclass(slots=True)
class Entry:
    address: str
    routing_type: str = STRIP  # anycast | multicast | pass | strip
    filter: Predicate | None = None

    def copy_routing_type(self, message: Message) -> str | None:
        rt = self.routing_type
        if rt == STRIP:
            return None
        if rt == PASS:
            return message.routing_type
        return rt


@dataclass(slots=True, eq=False)
class Forwarder:
    name: str
    source: str  # an address or a wildcard pattern
    entries: list[Entry]
    kind: str = "divert"  # divert | composite
    exclusive: bool = False
    filter: Predicate | None = None
    transformer: Callable[[Message], Message] | None = None
    # composites only
    forward_only: bool = True
    send_when_not_matched: bool = False
    applies_to: str | None = None  # a composite queue takes anycast sends, a topic multicast ones
    fired: int = 0
    bound_to: list = field(default_factory=list)

    def applies(self, message: Message, routing_type: str | None) -> bool:
        if self.applies_to is not None and routing_type is not None and routing_type != self.applies_to:
            return False
        return self.filter is None or self.filter(message)

    def matching_entries(self, message: Message) -> list[Entry]:
        return [e for e in self.entries if e.filter is None or e.filter(message)]

    def keeps_original(self, matched: bool) -> bool:
        if self.kind == "composite":
            return (not self.forward_only) or (not matched and self.send_when_not_matched)
        return not (self.exclusive and matched)


def route_through(po: PostOffice, message: Message, address, routing_type: str | None, plan: list) -> None:
    """Route through the forwarders bound to `address` (the rule above), then its queues."""
    if address.forwarders:
        if not message.id:
            message.id = po.next_message_id()
        keep = True
        for f in address.forwarders:
            if not f.exclusive or not f.applies(message, routing_type):
                continue
            entries = f.matching_entries(message)
            if entries:
                fire(po, f, message, entries, plan)
            if not f.keeps_original(bool(entries)):
                keep = False
        if not keep:
            plan.append((message, []))
            return
        for f in address.forwarders:
            if not f.exclusive and f.applies(message, routing_type):
                entries = f.matching_entries(message)
                if entries:
                    fire(po, f, message, entries, plan)
    out: list = []
    address.route(message, routing_type, out)
    plan.append((message, out))


def fire(po: PostOffice, f: Forwarder, message: Message, entries: list[Entry], plan: list) -> None:
    """Each matching entry gets a copy routed again to its address (auto-create applies)."""
    f.fired += 1
    annotate = po.annotate
    assert annotate is not None, "a post office with forwarders has the codec's annotate"
    for entry in entries:
        if message.hops >= MAX_FORWARD_HOPS:
            log.warning("message %s forwarded %d times (a cycle?): %s does not forward it again; "
                        "it goes to the dead-letter address", message.id, message.hops, f.name)
            plan_copy(po, message, f.name, po.settings_for(message.address).dead_letter_address,
                            {}, plan)
            return
        rt = entry.copy_routing_type(message)
        copy = annotate(message, orig_annotations(message, f.name), entry.address)
        copy.routing_type = rt
        copy.id = po.next_message_id()
        copy.hops = message.hops + 1
        if f.transformer is not None:
            try:
                copy = f.transformer(copy)
            except Exception:  # noqa: BLE001 - a user's transformer must not break routing
                log.exception("transformer of %s failed; the copy is not forwarded", f.name)
                continue
        try:
            po.ensure_send_target(entry.address, po.resolve_send_routing_type(entry.address, rt))
        except HermodError as e:
            log.warning("%s cannot forward to %s: %s", f.name, entry.address, e)
            continue
        route_through(po, copy, po.addresses[entry.address], rt, plan)


def orig_annotations(message: Message, via: str) -> dict:
    """The `x-opt-ORIG-*` annotations a forwarded or dead-lettered copy carries."""
    extra = {"x-opt-ORIG-ADDRESS": message.address, "x-opt-ORIG-MESSAGE-ID": message.id,
             "x-opt-ORIG-QUEUE": via}
    if message.routing_type is not None:
        extra["x-opt-ORIG-ROUTING-TYPE"] = 1 if message.routing_type == ANYCAST else 0
    return extra


def find_cycles(forwarders: list[Forwarder], matches: Callable[[str, str], bool]) -> list[list[str]]:
    """Rings of forwarders (a divert to its own address, A -> B -> A, ...) among configured
    forwarders; wildcard sources count when the target address matches them."""
    by_source: dict[str, list[Forwarder]] = {}
    for f in forwarders:
        by_source.setdefault(f.source, []).append(f)

    def next_hops(f: Forwarder) -> list[Forwarder]:
        out = []
        for e in f.entries:
            for source, group in by_source.items():
                if source == e.address or matches(source, e.address):
                    out.extend(group)
        return out

    cycles: list[list[str]] = []
    seen_rings: set[frozenset[str]] = set()

    def visit(f: Forwarder, path: list[Forwarder]) -> None:
        if f in path:
            ring = path[path.index(f):]
            key = frozenset(x.name for x in ring)
            if key not in seen_rings:
                seen_rings.add(key)
                cycles.append([x.name for x in ring])
            return
        for nxt in next_hops(f):
            visit(nxt, path + [f])

    for f in forwarders:
        visit(f, [])
    return cycles


__all__ = ["Entry", "Forwarder", "orig_annotations", "find_cycles", "FORCE_ANYCAST",
           "FORCE_MULTICAST", "PASS", "STRIP", "MULTICAST"]
