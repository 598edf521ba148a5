"""The routing layer's configuration: `[[divert]]`, `[[composite]]` and `[[virtual_topic]]`
turned into core forwarders and virtual topics, cycles refused.

Pure translation: no Proton and no codec. A divert's transformer is user code over
`proton.Message`, so the caller passes the loader (`protocol.transformers.load_transformer`)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from .core.forwarding import Entry, Forwarder, find_cycles
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


def forwarders(config, compile_filter: Callable, load_transformer: TransformerLoader) -> list[Forwarder]:
    """The configured diverts and composites as core forwarders; RoutingConfigError (one line)
    for a transformer that does not load or a forwarding cycle."""
    out: list[Forwarder] = []
    for d in config.diverts:
        targets = [a.strip() for a in d["forwarding_address"].split(",") if a.strip()]
        out.append(Forwarder(
            name=d["name"], source=d["address"], kind="divert", exclusive=d.get("exclusive", False),
            entries=[Entry(a, d.get("routing_type", "strip")) for a in targets],
            filter=compile_filter(d["filter"]) if d.get("filter") else None,
            transformer=load_transformer(d["transformer"], config.path) if d.get("transformer") else None))
    for c in config.composites:
        entries = []
        for fw in c["forward"]:
            target, rt = (fw["queue"], ANYCAST) if "queue" in fw else (fw["topic"], MULTICAST)
            entries.append(Entry(target, rt, compile_filter(fw["selector"]) if fw.get("selector") else None))
        out.append(Forwarder(
            name=c["name"], source=c["name"], kind="composite", exclusive=True, entries=entries,
            forward_only=c["forward_only"], send_when_not_matched=c["send_when_not_matched"],
            applies_to=ANYCAST if c["kind"] == "queue" else MULTICAST))
    cycles = find_cycles(out, matches)
    if cycles:
        rings = "; ".join(" -> ".join(ring + ring[:1]) for ring in cycles)
        raise RoutingConfigError(f"forwarding cycle in the configuration: {rings}")
    return out


def install(po, config, installed: list[Forwarder]) -> list[Forwarder]:
    """Bind the forwarders `forwarders()` built from `config`; a composite's own destination
    exists as its kind says."""
    for c in config.composites:
        keeps = not c["forward_only"] or c["send_when_not_matched"]
        if c["kind"] == "queue" and keeps:
            po.create_queue(c["name"], c["name"], ANYCAST, purpose=QueuePurpose.COMPOSITE)
        elif c["kind"] == "queue":
            po.create_address(c["name"], {ANYCAST})
        else:
            po.create_address(c["name"], {MULTICAST})
    for f in installed:
        po.add_forwarder(f)
    return installed
