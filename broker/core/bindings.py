"""Bindings: everything bound to an address, and the one loop that routes a message through them.

A binding (Artemis `Binding`) is a queue or a divert (`forwarding.Divert`, which also stands
for composites) bound to an address. Each has a routing name, an `exclusive` flag, a filter and
`route(message, routing_type, context)`. Bindings that share a routing name form a group, and
each group takes a message at most once:

- the anycast queues of an address share the address's name: one group, one of them takes each
  message, in turns (round-robin over those whose filter matches);
- a multicast queue's routing name is its own name, so every one gets a copy; a wildcard
  subscription's queue (bound to `news.#`) is bound in the same way to each concrete address the
  pattern matches, when either is created, so a send stays a dictionary lookup;
- a divert's routing name is its own (unique) name: every divert that applies fires.

An anycast send reaches the anycast group only, a multicast send the multicast queues only, a
send with no routing type both; diverts see every send (a composite checks its own kind).

Order on one address (Artemis `BindingsImpl`): the exclusive bindings first, and when one of them
takes the message (an exclusive divert that fired, a composite that keeps nothing) none of the
others gets it; then the non-exclusive diverts, then the queue groups. A message sent to
`address::queue` (a fully qualified queue name) goes to that queue binding alone.

Diverts re-enter routing through the send's `RoutingContext` (the plan being built, the
addresses on the copy's way for loop protection), never through a recursive post office call.

A binding's `exclusive` is a routing word (an exclusive divert takes the message from the
address's other bindings); a queue's `exclusive` is a consumer word (one consumer takes
everything, `dispatch.py`): queues are never exclusive bindings here.

The same routing runs as a dry run for management's `explain`: a `RoutingContext` with a
`Trace` records each decision (an address reached or the one a send would create, each divert
and its targets, a cycle, the original taken, each queue and its filter) and changes nothing:
no address or queue is created, no round-robin turn moves, no id is taken, no counter or cache
of a divert's target is written. So `explain` can never drift from where a message goes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .copies import plan_copy
from .errors import AddressNotFound, HermodError
from .forwarding import Divert, Target, route_through
from .message import ANYCAST, MULTICAST, Message

if TYPE_CHECKING:
    from .address import Address
    from .postoffice import Plan, PostOffice
    from .queue import Queue


class Binding(Protocol):
    """What is bound to an address (Artemis `Binding`): a `queue.Queue` (bound as itself; its
    routing name is the address's for an anycast queue, its own for a multicast one) or a
    `forwarding.Divert` (a divert or a composite: its own name, `exclusive`, a filter and
    `route`). Only the name is common; `Bindings` keeps them by routing-name group."""
    name: str


class Trace(Protocol):
    """The recorder of a dry run (`management/explain.py` implements it): routing calls it at
    each decision, `at` being the address where it is taken."""

    def address(self, at: str, routing_type: str | None) -> None: ...
    def created(self, at: str, routing_type: str | None, queue: bool) -> None:
        """`at` does not exist (or has no anycast queue for an anycast send) and would be
        created, with an anycast queue of its name when `queue`."""
    def refused(self, at: str, reason: str) -> None: ...
    def divert(self, at: str, divert: Divert, targets: list[Target]) -> None: ...
    def cycle(self, at: str, divert: Divert, target: str) -> None: ...
    def original_taken(self, at: str) -> None: ...
    def queues(self, at: str, message: Message, candidates: list[Queue], chosen: list[Queue]) -> None:
        """The queues routing looked at in order, and those that took the message."""


class Bindings:
    """The bindings of one address (by routing-name group, see the module docstring)."""

    __slots__ = ("name", "queues", "anycast", "multicast", "exclusive_diverts", "diverts", "_turn", "version")

    def __init__(self, name: str):
        self.name = name  # the address: the anycast group's routing name
        self.queues: dict[str, Queue] = {}  # the address's own queues by name (FQQN sends)
        self.anycast: list[Queue] = []  # the anycast group, in binding order
        # Multicast queues, each its own group, in binding order; a dict so that binding or
        # unbinding one of 100,000 subscriptions costs O(1), not a list scan.
        self.multicast: dict[Queue, None] = {}
        self.exclusive_diverts: list[Divert] = []  # exclusive bindings: diverts and composites
        self.diverts: list[Divert] = []  # the non-exclusive ones
        self._turn = 0
        # Bumped by every change of what is bound here: a divert's target keeps the queues a
        # copy goes to with the version it read them at (`fixed_selection`, `forwarding.route_through`).
        self.version = 0

    # -- binding -------------------------------------------------------------------------------
    def add_queue(self, queue: Queue, own: bool = True) -> None:
        """Bind a queue: one of the address's own (`own`), or a wildcard subscription's queue
        bound to a matching address."""
        self.version += 1
        if own:
            self.queues[queue.name] = queue
        if queue.routing_type == ANYCAST:
            self.anycast.append(queue)
        else:
            self.multicast[queue] = None

    def remove_queue(self, queue: Queue, own: bool = True) -> None:
        if own and self.queues.pop(queue.name, None) is None:
            return
        self.version += 1
        if queue.routing_type == ANYCAST:
            if queue in self.anycast:
                self.anycast.remove(queue)
        else:
            self.multicast.pop(queue, None)

    def add(self, binding: Binding) -> None:
        """Bind what a pattern brought here (`topic_index.BindingIndex`): a divert, or a
        wildcard subscription's queue (bound to another address, so not one of `queues`)."""
        if isinstance(binding, Divert):
            self.add_divert(binding)
        else:
            self.add_queue(binding, own=False)  # type: ignore[arg-type]

    def remove(self, binding: Binding) -> None:
        if isinstance(binding, Divert):
            self.remove_divert(binding)
        else:
            self.remove_queue(binding, own=False)  # type: ignore[arg-type]

    def add_divert(self, divert: Divert) -> None:
        self.version += 1
        group = self.exclusive_diverts if divert.exclusive else self.diverts
        if divert not in group:
            group.append(divert)

    def remove_divert(self, divert: Divert) -> None:
        self.version += 1
        group = self.exclusive_diverts if divert.exclusive else self.diverts
        if divert in group:
            group.remove(divert)

    def all_diverts(self) -> list[Divert]:
        """The divert bindings in the order they are evaluated (exclusive ones first)."""
        return self.exclusive_diverts + self.diverts

    # -- routing -------------------------------------------------------------------------------
    def plan(self, message: Message, routing_type: str | None, postoffice: PostOffice,
             queue_name: str | None = None) -> Plan:
        """A send's routing plan from this address. With no divert bound, no copy can be made
        and no context is needed: the common case costs one pick and no allocation but the plan."""
        if queue_name is None and not self.exclusive_diverts and not self.diverts:
            out: list[Queue] = []
            self.select(message, routing_type, out)
            return [(message, out)]
        context = RoutingContext(postoffice)
        self.route(message, routing_type, context, queue_name)
        return context.plan

    def route(self, message: Message, routing_type: str | None, context: RoutingContext,
              queue_name: str | None = None) -> None:
        """Add to `context.plan` the message with the queues of this address that take it,
        after the copies its diverts make (the order in the module docstring). `queue_name`:
        a fully qualified send, to that one of the address's own queues."""
        trace = context.trace
        if trace is not None:
            trace.address(self.name, routing_type)
        if queue_name is not None:
            queue = self.queues.get(queue_name)
            taken = [queue] if queue is not None and queue.accepts(message) else []
            if trace is not None:
                trace.queues(self.name, message, [queue] if queue is not None else [], taken)
            context.plan.append((message, taken))
            return
        if self.exclusive_diverts or self.diverts:
            if not message.id and trace is None:
                message.id = context.postoffice.next_message_id()
            context.path.append(self.name)
            try:
                if self.exclusive_diverts and not route_through(self.exclusive_diverts, message, routing_type, context):
                    if trace is not None:
                        trace.original_taken(self.name)
                    context.plan.append((message, []))
                    return
                if self.diverts:
                    route_through(self.diverts, message, routing_type, context)
            finally:
                context.path.pop()
        out: list[Queue] = []
        if trace is None:
            self.select(message, routing_type, out)
        else:
            turn = self._turn  # a dry run's pick moves no turn
            self.select(message, routing_type, out)
            self._turn = turn
            trace.queues(self.name, message, self._candidates(routing_type), out)
        context.plan.append((message, out))

    def _candidates(self, routing_type: str | None) -> list[Queue]:
        """The queues `select` looks at for a send of `routing_type`, in the order it does."""
        out: list[Queue] = []
        if routing_type != MULTICAST:
            n = len(self.anycast)
            out.extend(self.anycast[(self._turn + i) % n] for i in range(n))
        if routing_type != ANYCAST:
            out.extend(self.multicast)
        return out

    def select(self, message: Message, routing_type: str | None, out: list[Queue]) -> None:
        """Append to `out` the queues that take `message`: one pick from the anycast group,
        every matching multicast queue."""
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

    def fixed_selection(self, routing_type: str | None) -> list[Queue] | None:
        """The queues every send of `routing_type` reaches here, whatever the message, while
        nothing bound here changes (`version`): no divert, no filter, no turn to take among
        anycast queues. None when the message or the turn decides."""
        if self.exclusive_diverts or self.diverts:
            return None
        out: list[Queue] = []
        if routing_type != MULTICAST:
            if len(self.anycast) > 1:
                return None
            out.extend(self.anycast)
        if routing_type != ANYCAST:
            out.extend(self.multicast)
        for q in out:
            if q.filter is not None or q.selector_aware:  # a selector-aware filter follows its consumers
                return None
        return out

    def refusal(self, routing_type: str | None, queue_name: str | None) -> str | None:
        """Why a send here that reached no queue must be refused (its target is missing), or
        None when the bindings drop it by design (a multicast address with no subscription,
        filters that take nothing, diverts that keep no original)."""
        if queue_name is not None:
            return None if queue_name in self.queues else f"queue {self.name}::{queue_name} does not exist"
        if routing_type == ANYCAST and not self.anycast and not (self.exclusive_diverts or self.diverts):
            return f"address {self.name} has no anycast queue"
        return None

    def in_use(self) -> bool:
        """Anything of the address's own bound (a wildcard subscription's queue is not)."""
        return bool(self.queues or self.exclusive_diverts or self.diverts)


class RoutingContext:
    """One send's routing: the plan being built (the message and every copy, each with the
    queues it goes to) and the addresses on the way of the copy being routed: a divert whose
    target is already on that way is in a cycle, and its copy is dead-lettered. Two diverts
    that reach one address along different ways each deliver their copy there. `trace`: a dry
    run's recorder (module docstring); None for a real send."""

    __slots__ = ("postoffice", "plan", "path", "copies_of", "trace")

    def __init__(self, postoffice: PostOffice, trace: Trace | None = None):
        self.postoffice = postoffice
        self.plan: Plan = []
        self.path: list[str] = []  # at most MAX_FORWARD_HOPS + 1 names: a list scan is cheap
        self.copies_of: tuple | None = None  # the divert copies' shared part (`copies.shared_part`)
        self.trace = trace

    def target(self, name: str, routing_type: str | None) -> Address | _Unmade | None:
        """The address a send or a copy with `routing_type` goes to at `name`, created as the
        settings allow (`PostOffice.forward_target`; HermodError when it may not be). In a dry
        run nothing is created: the same decision is recorded, and an address that would be new
        is stood for by the bindings it would get from wildcard patterns (`_Unmade`; None when
        it would get none: its auto-created queue, recorded, is all it would have)."""
        po = self.postoffice
        trace = self.trace
        if trace is None:
            return po.forward_target(name, routing_type)
        address = po.addresses.get(name)
        rt = po.resolve_send_routing_type(name, routing_type)
        settings = po.settings_for(name)
        needs_queue = rt == ANYCAST and (address is None or not address.bindings.anycast)
        if address is None and not settings.auto_create_addresses:
            trace.refused(name, "does not exist and auto-create is off: refused")
            raise _dry_refusal(name, "does not exist")
        if needs_queue and not settings.auto_create_queues:
            trace.refused(name, "has no anycast queue and auto-create is off: refused")
            raise _dry_refusal(name, "has no anycast queue")
        if address is None or needs_queue:
            trace.created(name, rt, needs_queue)
        if address is None:
            bound = po.bound.would_bind(name)
            if not bound:
                return None
            unmade = _Unmade(name)
            for binding in bound:
                unmade.bindings.add(binding)
            return unmade
        return address

    def dead_letter(self, message: Message, via: str) -> None:
        """A copy of `message` to the dead-letter address of its own address, into this plan
        (a dry run records where it would go)."""
        po = self.postoffice
        target = po.settings_for(message.address).dead_letter_address
        if self.trace is None:
            plan_copy(po, message, via, target, {}, self.plan)
            return
        if not target or po.annotate is None or target == message.address:
            return
        address = po.addresses.get(target)
        if address is None or not address.queues:
            self.trace.created(target, ANYCAST, True)  # as `copies.plan_copy` creates it
            return
        path, self.path = self.path, []  # routed as a new send (`plan_copy`)
        try:
            address.bindings.route(message, None, self)
        finally:
            self.path = path


class _Unmade:
    """A dry run's address that a send would create: the bindings wildcard patterns would give
    it (their own objects, bound to this stand-in only: nothing real changes)."""

    __slots__ = ("name", "bindings")

    def __init__(self, name: str):
        self.name = name
        self.bindings = Bindings(name)


def _dry_refusal(name: str, why: str) -> HermodError:
    return AddressNotFound(f"target address {name} {why}")


__all__ = ["Binding", "Bindings", "RoutingContext", "Trace"]
