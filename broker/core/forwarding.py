"""Diverts: Artemis diverts and ActiveMQ Classic composite destinations, one mechanism.

A `Divert` is a binding (`bindings.py`) on its source address, or on every address its wildcard
source matches. When a message is routed there, each matching `Target` of the divert gets a copy
of the message (new id, `x-opt-ORIG-*` annotations, routing type set as the target says), and the
copy re-enters routing at the target's address through the send's `RoutingContext`, so targets
may themselves divert. Whether the address's other bindings still get the original is the
divert's `keeps_original` rule:

- divert, exclusive: only when it did not fire; non-exclusive: always;
- composite (always exclusive): when `forward_only` is false, or when nothing matched and
  `send_when_not_matched`.

A composite queue or topic (`[[composite]]`) is a divert bound to the composite's own address
whose targets are its `forward` destinations, each with an optional selector.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import logging
from typing import TYPE_CHECKING, Callable

from .copies import divert_copy, shared_part
from .errors import HermodError
from .message import Message, RoutingType, SharedBodyCopy

if TYPE_CHECKING:
    from .bindings import RoutingContext

log = logging.getLogger("hermod.core")

MAX_FORWARD_HOPS = 16  # a message forwarded more often is in a cycle: dead-lettered instead

Predicate = Callable[[Message], bool]

# How a target sets the routing type of its copy (the divert's `routing_type`).
FORCE_ANYCAST, FORCE_MULTICAST, PASS, STRIP = "anycast", "multicast", "pass", "strip"
# What a divert was configured as (`[[divert]]` or `[[composite]]`; management shows it).
DIVERT, COMPOSITE = "divert", "composite"


@dataclass(slots=True)
class Target:
    """Where a divert sends its copies: an address, how the copy's routing type is set, and
    (a composite's destinations) a selector."""
    address: str
    routing_type: str = STRIP  # anycast | multicast | pass | strip
    filter: Predicate | None = None
    # Where its last copy went, while that holds (`Divert.fire`): (the address, the copy's
    # routing type, the address's bindings version then, the queues it reached).
    reached: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.routing_type in (FORCE_ANYCAST, FORCE_MULTICAST):
            self.routing_type = RoutingType(self.routing_type).value  # copies carry plain strings

    def copy_routing_type(self, message: Message) -> str | None:
        rt = self.routing_type
        if rt == STRIP:
            return None
        if rt == PASS:
            return message.routing_type
        return rt


@dataclass(slots=True, eq=False)
class Divert:
    """A divert binding. Its routing name is its (unique) name: every divert that applies fires,
    none shares a turn with another binding."""
    name: str
    source: str  # an address or a wildcard pattern
    targets: list[Target]
    kind: str = DIVERT  # divert | composite
    exclusive: bool = False
    filter: Predicate | None = None
    transformer: Callable[[Message], Message] | None = None
    # composites only
    forward_only: bool = True
    send_when_not_matched: bool = False
    applies_to: str | None = None  # a composite queue takes anycast sends, a topic multicast ones
    fired: int = 0
    _unfiltered: bool = field(init=False, repr=False, compare=False, default=False)

    @property
    def routing_name(self) -> str:
        return self.name

    def __post_init__(self) -> None:
        self._unfiltered = all(t.filter is None for t in self.targets)

    def applies(self, message: Message, routing_type: str | None) -> bool:
        if self.applies_to is not None and routing_type is not None and routing_type != self.applies_to:
            return False
        return self.filter is None or self.filter(message)

    def matching_targets(self, message: Message) -> list[Target]:
        if self._unfiltered:  # every divert's target (no list per message)
            return self.targets
        return [t for t in self.targets if t.filter is None or t.filter(message)]

    def keeps_original(self, matched: bool) -> bool:
        if self.kind == COMPOSITE:
            return (not self.forward_only) or (not matched and self.send_when_not_matched)
        return not (self.exclusive and matched)

    def route(self, message: Message, routing_type: str | None, context: RoutingContext) -> bool:
        """Fire when the divert applies; True when the address's other bindings still get the
        original (the rule above). A plain divert (no filter, no kind of send it keeps to,
        no target selector) decides without a call per rule."""
        if (self.applies_to is not None or self.filter is not None) and not self.applies(message, routing_type):
            return True
        targets = self.targets if self._unfiltered else self.matching_targets(message)
        if targets:
            self.fire(message, targets, context)
        if self.kind == DIVERT:
            return not (self.exclusive and targets)
        return self.keeps_original(bool(targets))

    def fire(self, message: Message, targets: list[Target], context: RoutingContext) -> None:
        """Each matching target gets a copy that re-enters routing at its address (auto-create
        applies); a copy in a cycle goes to the dead-letter address instead.

        Per copy, no list of targets, no settings lookup for an existing target address
        (`PostOffice.forward_target`) and no full-address lookups in `admit` while nothing is
        full: with the copy's routing straight into the target's bindings, a copy went from
        7.6 to 6.6-7.1 µs of CPU (benchmarks/divert_copies.py, in process, 10 diverts); with
        the target's routing type and a plain divert's rules inline (`route`) and the codec's
        one-pass annotated head, 6.95 -> 5.93 µs (medians of 5, interleaved, load 4)."""
        self.fired += 1
        po = context.postoffice
        path = context.path
        plan = context.plan
        addresses = po.addresses
        for target in targets:
            name = target.address
            if message.hops >= MAX_FORWARD_HOPS or name in path:
                log.warning("message %s forwarded %d times (a cycle?): %s does not forward it again; "
                            "it goes to the dead-letter address", message.id, message.hops, self.name)
                context.dead_letter(message, self.name)
                return
            rt: str | None = target.routing_type  # `Target.copy_routing_type`, inline
            if rt == STRIP:
                rt = None
            elif rt == PASS:
                rt = message.routing_type
            copy = divert_copy(po, message, self.name, name, rt, self.transformer, context)
            if copy is None:
                continue
            # The queues the target's last copy reached, while its address is the same object
            # and nothing bound there changed (a deleted or recreated queue or address, a new
            # divert, a filter: `Bindings.version`); else routed, and kept when
            # `Bindings.fixed_selection` says the next copy goes the same way. No
            # `forward_target`, `Bindings.route`/`select` per copy: 3.57 -> 3.21 µs a copy in
            # process (`divert_copies.py --only copy`, 5 interleaved, load 2.4); live fanout
            # 0.946 -> 0.927 broker CPU s per 100k deliveries (4 interleaved, load 2.6-2.8).
            reached = target.reached
            if reached is not None and reached[1] == rt:
                address = reached[0]
                if address.bindings.version == reached[2] and addresses.get(name) is address:
                    plan.append((copy, reached[3][:]))
                    continue
            _route_copy(self.name, target, copy, rt, context)


def _route_copy(via: str, target: Target, copy: Message, rt: str | None, context: RoutingContext) -> None:
    """A copy to `target` that its `reached` queues do not take: routed at the target's
    address (auto-create applies), and those queues kept when every next copy goes the same
    way (`Bindings.fixed_selection`)."""
    try:
        address = context.postoffice.forward_target(target.address, rt)
    except HermodError as e:
        log.warning("%s cannot forward to %s: %s", via, target.address, e)
        return
    bindings = address.bindings
    bindings.route(copy, rt, context)
    queues = bindings.fixed_selection(rt)
    target.reached = None if queues is None else (address, rt, bindings.version, queues)


def plain(divert: Divert) -> bool:
    """Does `divert` fire for every message, each target taking a copy as it is made (no
    filter, no kind of send it keeps to, no target selector, no transformer), and keep the
    original? Such diverts of one address fire in one pass (`fire_plain`)."""
    return (divert.kind == DIVERT and not divert.exclusive and divert.applies_to is None
            and divert.filter is None and divert._unfiltered and divert.transformer is None)


def fire_plain(diverts: list[Divert], message: Message, context: RoutingContext) -> None:
    """`Divert.route` of every divert in `diverts` (each `plain`), in one pass: the copies'
    shared part read once (`copies.shared_part`), each copy made and sent to the queues its
    target reached before without a Python call but its head and its object."""
    po = context.postoffice
    heads = po.copy_heads
    if heads is None:  # no codec to splice heads with: each divert on its own
        for divert in diverts:
            divert.route(message, None, context)
        return
    shared = context.copies_of
    if shared is None or shared[0] is not message:
        shared = context.copies_of = shared_part(heads, message, diverts[0].name)
    _original, head_of, base, bare_at, container_id, arrival, hops, scheduled, expiration = shared
    path, plan, addresses, ids = context.path, context.plan, po.addresses, po._ids  # `next_message_id`, inline
    for divert in diverts:
        divert.fired += 1
        via = divert.name
        for target in divert.targets:
            name = target.address
            if hops > MAX_FORWARD_HOPS or name in path:  # the copy's hops: the original's + 1
                log.warning("message %s forwarded %d times (a cycle?): %s does not forward it again; "
                            "it goes to the dead-letter address", message.id, message.hops, via)
                context.dead_letter(message, via)
                break
            rt: str | None = target.routing_type  # `Target.copy_routing_type`, inline
            if rt == STRIP:
                rt = None
            elif rt == PASS:
                rt = message.routing_type
            head, envelope = head_of(via)
            copy = SharedBodyCopy(head, base, bare_at, envelope, name, container_id, arrival, rt, next(ids), hops,
                                  scheduled, expiration)
            reached = target.reached  # as in `Divert.fire`
            if reached is not None and reached[1] == rt:
                address = reached[0]
                if address.bindings.version == reached[2] and addresses.get(name) is address:
                    plan.append((copy, reached[3][:]))
                    continue
            _route_copy(via, target, copy, rt, context)


def find_cycles(diverts: list[Divert], matches: Callable[[str, str], bool]) -> list[list[str]]:
    """Rings of diverts (a divert to its own address, A -> B -> A, ...) among configured
    diverts and composites; wildcard sources count when the target address matches them."""
    by_source: dict[str, list[Divert]] = {}
    for d in diverts:
        by_source.setdefault(d.source, []).append(d)

    def next_hops(d: Divert) -> list[Divert]:
        out = []
        for t in d.targets:
            for source, group in by_source.items():
                if source == t.address or matches(source, t.address):
                    out.extend(group)
        return out

    cycles: list[list[str]] = []
    seen_rings: set[frozenset[str]] = set()

    def visit(d: Divert, path: list[Divert]) -> None:
        if d in path:
            ring = path[path.index(d):]
            key = frozenset(x.name for x in ring)
            if key not in seen_rings:
                seen_rings.add(key)
                cycles.append([x.name for x in ring])
            return
        for nxt in next_hops(d):
            visit(nxt, path + [d])

    for d in diverts:
        visit(d, [])
    return cycles


__all__ = ["Divert", "Target", "find_cycles", "fire_plain", "plain", "FORCE_ANYCAST",
           "FORCE_MULTICAST", "PASS", "STRIP", "DIVERT", "COMPOSITE", "MAX_FORWARD_HOPS"]
