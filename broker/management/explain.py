"""`explain`: how a message sent to an address would route, without sending it or changing
anything. It is the post office's own routing (core/bindings.py, core/forwarding.py) run as a
dry run: a `RoutingContext` with a `Recorder` as its trace. Routing calls the recorder at each
decision and creates nothing (no address or queue, no round-robin turn, no message id, no
divert counter or target cache), so the answer cannot drift from where a message really goes;
this module only turns the record into steps."""
from __future__ import annotations

from typing import Callable

from ..core.bindings import RoutingContext
from ..core.errors import HermodError
from ..core.forwarding import Divert, Target
from ..core.message import Message
from ..core.queue import Queue
from ..core.virtual_topics import is_virtual

View = Callable[[str], bool]


def explain(po, virtual_topics, message: Message, address: str, routing_type: str | None,
            view: View | None = None, queue: str | None = None) -> dict:
    """Where `message` sent to `address` (to its queue `queue`: a fully qualified name) with
    `routing_type` would go. `view`: the addresses the caller may browse (None: all). The
    dry run goes everywhere a message would; the answer shows only the steps at, the forwards
    to and the queues on the addresses in view."""
    recorder = Recorder(po, virtual_topics)
    context = RoutingContext(po, recorder)
    created = address not in po.addresses
    bound = None
    if queue is not None:  # a fully qualified send: to that queue alone, never created
        bound = po.addresses.get(address)
        if bound is None or queue not in bound.queues:
            recorder.refused(address, f"queue {address}::{queue} does not exist: refused")
            bound = None
    else:
        try:
            bound = context.target(address, routing_type)
        except HermodError:
            bound = None  # recorded as refused
    if bound is not None:
        bound.bindings.route(message, routing_type, context, queue)
    steps, queues = recorder.steps, recorder.reached
    if view is not None:
        steps = [_seen(s, view) for s in steps if view(s["at"])]
        queues = [(name, at) for name, at in queues if view(at)]
    for s in steps:
        del s["at"]
    return {"address": address if queue is None else f"{address}::{queue}", "routing_type": routing_type,
            "created": created, "steps": steps, "queues": list(dict.fromkeys(name for name, _at in queues))}


def _seen(step: dict, view: View) -> dict:
    if "to" in step:
        step["to"] = [a for a in step["to"] if view(a)]
    return step


class Recorder:
    """The dry run's trace (`core.bindings.Trace`): each step names the address it is `at`
    (for the caller's view) and what was decided there; `reached` the queues (name, address)
    that would take the message or one of its copies, an auto-created one named as its address."""

    def __init__(self, po, virtual_topics) -> None:
        self.po = po
        self.virtual_topics = virtual_topics
        self.steps: list[dict] = []
        self.reached: list[tuple[str, str]] = []
        self.unmade: set[str] = set()  # addresses the send would create

    def address(self, at: str, routing_type: str | None) -> None:
        if at not in self.unmade:  # else its step says it would be created
            self.steps.append({"kind": "address", "name": at, "routing_type": routing_type, "passed": True, "at": at})
        if is_virtual(self.virtual_topics, at):
            self.steps.append({"kind": "virtual-topic", "name": at, "passed": True, "at": at,
                               "detail": "each consumer group's queue (Consumer.*.%s) gets a copy" % at})

    def created(self, at: str, routing_type: str | None, queue: bool) -> None:
        if at not in self.po.addresses:
            self.unmade.add(at)
            self.steps.append({"kind": "address", "name": at, "routing_type": routing_type, "passed": True,
                               "detail": f"auto-created ({routing_type or 'multicast and anycast'})", "at": at})
        if queue:
            self.steps.append({"kind": "queue", "name": at, "passed": True, "detail": "auto-created", "at": at})
            self.reached.append((at, at))

    def refused(self, at: str, reason: str) -> None:
        self.steps.append({"kind": "address", "name": at, "passed": False, "detail": reason, "at": at})

    def divert(self, at: str, divert: Divert, targets: list[Target]) -> None:
        step = {"kind": divert.kind, "name": divert.name, "exclusive": divert.exclusive, "passed": bool(targets),
                "to": [t.address for t in targets], "at": at}
        if divert.filter_text:
            step["filter"] = divert.filter_text
        selectors = {t.address: t.filter_text for t in divert.targets if t.filter_text}
        if selectors:  # a composite's forwards with a selector: each named, passed or not
            step["selectors"] = selectors
        self.steps.append(step)

    def cycle(self, at: str, divert: Divert, target: str) -> None:
        self.steps.append({"kind": "cycle", "name": target, "passed": False, "at": at,
                           "detail": f"{divert.name} would forward it into a cycle (or too often): "
                                     "the copy goes to the dead-letter address"})

    def original_taken(self, at: str) -> None:
        self.steps.append({"kind": "original", "name": at, "passed": False, "at": at,
                           "detail": "an exclusive forward took it: the address's queues do not"})

    def queues(self, at: str, message: Message, candidates: list[Queue], chosen: list[Queue]) -> None:
        for q in candidates:
            step = {"kind": "queue", "name": q.name, "routing_type": q.routing_type, "passed": q in chosen, "at": at}
            if q.filter_text:
                step["filter"] = q.filter_text
            self.steps.append(step)
        self.reached.extend((q.name, q.address.name) for q in chosen)
