"""`explain`: how a message sent to an address would route, without sending it or changing
anything (no address is created, no round-robin turn advances). The walk follows the post
office's rules (core/bindings.py): exclusive diverts/composites first, then the
non-exclusive ones, then the address's own queues and their filters; each forward is walked
again at its target address."""
from __future__ import annotations

from typing import Callable

from ..core.forwarding import MAX_FORWARD_HOPS
from ..core.message import ANYCAST, MULTICAST, Message
from ..core.virtual_topics import is_virtual


def explain(po, virtual_topics, message: Message, address: str, routing_type: str | None,
            view: Callable[[str], bool] | None = None) -> dict:
    """`view`: the addresses the caller may browse (None: all). The walk goes everywhere a
    message would; the answer shows only the steps at, the forwards to and the queues on the
    addresses in view."""
    steps: list[dict] = []
    queues: list[str] = []
    created = address not in po.addresses
    _walk(po, virtual_topics, message, address, routing_type, 0, steps, queues)
    if view is not None:
        steps = [_seen(s, view) for s in steps if view(s["at"])]
        queues = [q for q in queues if view(_queue_address(po, q))]
    for s in steps:
        del s["at"]
    return {"address": address, "routing_type": routing_type, "created": created,
            "steps": steps, "queues": list(dict.fromkeys(queues))}


def _seen(step: dict, view: Callable[[str], bool]) -> dict:
    if "to" in step:
        step["to"] = [a for a in step["to"] if view(a)]
    return step


def _queue_address(po, name: str) -> str:
    """The address of a queue the walk named (an auto-created one is named as its address)."""
    queue = po.queues.get(name)
    return queue.address.name if queue is not None else name


def _walk(po, virtual_topics, message, name: str, rt: str | None, hops: int, steps: list,
          queues: list, way: tuple[str, ...] = ()) -> None:
    """`way`: the addresses the copy came through (a copy back into one is in a cycle). Each
    step records the address it is `at` (the forwards walked from here mark their own first)."""
    start = len(steps)
    try:
        _walk_address(po, virtual_topics, message, name, rt, hops, steps, queues, way)
    finally:
        for step in steps[start:]:
            step.setdefault("at", name)


def _walk_address(po, virtual_topics, message, name: str, rt: str | None, hops: int, steps: list,
                  queues: list, way: tuple[str, ...]) -> None:
    step = {"kind": "address", "name": name, "routing_type": rt}
    steps.append(step)
    address = po.addresses.get(name)
    settings = po.settings_for(name)
    if address is None:
        if not settings.auto_create_addresses:
            step.update(passed=False, detail="does not exist and auto-create is off: refused")
            return
        step.update(passed=True, detail=f"auto-created ({rt or settings.default_routing_type})")
        if (rt or settings.default_routing_type) == ANYCAST and settings.auto_create_queues:
            steps.append({"kind": "queue", "name": name, "passed": True, "detail": "auto-created"})
            queues.append(name)
        return
    step["passed"] = True
    if is_virtual(virtual_topics, name):
        steps.append({"kind": "virtual-topic", "name": name, "passed": True,
                      "detail": "each consumer group's queue (Consumer.*.%s) gets a copy" % name})
    if hops >= MAX_FORWARD_HOPS or name in way:
        steps.append({"kind": "cycle", "name": name, "passed": False,
                      "detail": "forwarded too often: goes to the dead-letter address"})
        return
    keep = True
    for exclusive in (True, False):
        if exclusive is False and not keep:
            break
        for d in address.bindings.exclusive_diverts if exclusive else address.bindings.diverts:
            applies = d.applies(message, rt)
            targets = d.matching_targets(message) if applies else []
            steps.append({"kind": d.kind, "name": d.name, "exclusive": d.exclusive,
                          "passed": bool(targets),
                          "to": [t.address for t in targets]})
            for t in targets:
                _walk(po, virtual_topics, message, t.address, t.copy_routing_type(message), hops + 1,
                      steps, queues, way + (name,))
            if exclusive and not d.keeps_original(bool(targets)):
                keep = False
    if not keep:
        steps.append({"kind": "original", "name": name, "passed": False,
                      "detail": "an exclusive forward took it: the address's queues do not"})
        return
    anycast = address.bindings.anycast
    if rt == ANYCAST and not anycast:
        if settings.auto_create_queues:
            steps.append({"kind": "queue", "name": name, "passed": True, "detail": "auto-created"})
            queues.append(name)
        return
    if rt != MULTICAST:
        chosen = None
        n = len(anycast)
        for i in range(n):  # the queue the next send would pick; the turn is not advanced
            q = anycast[(address.bindings._turn + i) % n]
            passed = q.filter is None or bool(q.filter(message))
            _queue_step(steps, q, passed and chosen is None)
            if passed and chosen is None:
                chosen = q
        if chosen is not None:
            queues.append(chosen.name)
    if rt != ANYCAST:
        for q in address.bindings.multicast:
            passed = q.filter is None or bool(q.filter(message))
            _queue_step(steps, q, passed)
            if passed:
                queues.append(q.name)


def _queue_step(steps: list, q, passed: bool) -> None:
    step = {"kind": "queue", "name": q.name, "routing_type": q.routing_type, "passed": passed}
    if q.filter_text:
        step["filter"] = q.filter_text
    steps.append(step)
