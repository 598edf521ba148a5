"""The routing layer's configuration: `[[divert]]`, `[[composite]]` and `[[virtual_topic]]`
turned into core diverts and virtual topics, cycles refused.

Pure translation: no Proton and no codec. A divert's transformer is user code over
`proton.Message`, so the caller passes the loader (`protocol.transformers.load_transformer`)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from .core.forwarding import COMPOSITE, DIVERT, Divert, Target, find_cycles
from .core.address import QueuePurpose
from .core.message import ANYCAST, MULTICAST, Message
from .core.virtual_topics import VirtualTopic
from .core.wildcards import matches

log = logging.getLogger("hermod.routing")


class RoutingConfigError(Exception):
    """A routing configuration the broker cannot start with (one line)."""


def virtual_topics(config) -> list[VirtualTopic]:
    """The configured virtual topics, or the built-in `VirtualTopic.>` when none is."""
    if not config.virtual_topics:
        return [VirtualTopic()]
    return [VirtualTopic(**vt) for vt in config.virtual_topics]


TransformerLoader = Callable[[str, Path | None], Callable[[Message], Message]]


def diverts(config, compile_filter: Callable, load_transformer: TransformerLoader) -> list[Divert]:
    """The configured diverts and composites as core diverts (a composite's `forward`s are its
    targets); RoutingConfigError (one line) for a transformer that does not load or a
    forwarding cycle."""
    out: list[Divert] = []
    for d in config.diverts:
        targets = [a.strip() for a in d["forwarding_address"].split(",") if a.strip()]
        out.append(Divert(
            name=d["name"], source=d["address"], kind=DIVERT, exclusive=d.get("exclusive", False),
            targets=[Target(a, d.get("routing_type", "strip")) for a in targets],
            filter=compile_filter(d["filter"]) if d.get("filter") else None, filter_text=d.get("filter") or None,
            transformer=load_transformer(d["transformer"], config.path) if d.get("transformer") else None))
    for c in config.composites:
        forwards = []
        for fw in c["forward"]:
            target, rt = (fw["queue"], ANYCAST) if "queue" in fw else (fw["topic"], MULTICAST)
            selector = fw.get("selector") or None
            forwards.append(Target(target, rt, compile_filter(selector) if selector else None, selector))
        out.append(Divert(
            name=c["name"], source=c["name"], kind=COMPOSITE, exclusive=True, targets=forwards,
            forward_only=c["forward_only"], send_when_not_matched=c["send_when_not_matched"],
            applies_to=ANYCAST if c["kind"] == "queue" else MULTICAST))
    cycles = find_cycles(out, matches)
    if cycles:
        rings = "; ".join(" -> ".join(ring + ring[:1]) for ring in cycles)
        raise RoutingConfigError(f"forwarding cycle in the configuration: {rings}")
    return out


def install(po, config, installed: list[Divert]) -> list[Divert]:
    """Bind the diverts `diverts()` built from `config`; a composite's own destination
    exists as its kind says."""
    for c in config.composites:
        keeps = not c["forward_only"] or c["send_when_not_matched"]
        if c["kind"] == "queue" and keeps:
            po.create_queue(c["name"], c["name"], ANYCAST, purpose=QueuePurpose.COMPOSITE)
        elif c["kind"] == "queue":
            po.create_address(c["name"], {ANYCAST})
        else:
            po.create_address(c["name"], {MULTICAST})
    for d in installed:
        po.add_divert(d)
    return installed
