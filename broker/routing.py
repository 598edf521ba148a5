"""The routing layer's configuration: `[[divert]]`, `[[composite]]` and `[[virtual_topic]]`
turned into core forwarders and virtual topics, with transformers loaded and cycles refused."""
from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Callable

from proton import Message as ProtonMessage

from .core.forwarding import Entry, Forwarder, find_cycles
from .core.message import ANYCAST, MULTICAST, Message
from .core.virtual_topics import VirtualTopic
from .core.wildcards import matches
from .protocol import codec

log = logging.getLogger("hermod.routing")


class RoutingConfigError(Exception):
    """A routing configuration the broker cannot start with (one line)."""


def virtual_topics(config) -> list[VirtualTopic]:
    """The configured virtual topics, or the built-in `VirtualTopic.>` when none is."""
    if not config.virtual_topics:
        return [VirtualTopic()]
    return [VirtualTopic(**vt) for vt in config.virtual_topics]


def forwarders(config, compile_filter: Callable) -> list[Forwarder]:
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


def install(po, config, compile_filter: Callable, built: list[Forwarder] | None = None) -> list[Forwarder]:
    """Bind the configured forwarders (`built` by `forwarders()` already, when given); a
    composite's own destination exists as its kind says."""
    installed = built if built is not None else forwarders(config, compile_filter)
    for c in config.composites:
        keeps = not c["forward_only"] or c["send_when_not_matched"]
        if c["kind"] == "queue" and keeps:
            po.create_queue(c["name"], c["name"], ANYCAST, purpose="composite")
        elif c["kind"] == "queue":
            po.create_address(c["name"], {ANYCAST})
        else:
            po.create_address(c["name"], {MULTICAST})
    for f in installed:
        po.add_forwarder(f)
    return installed


def load_transformer(spec: str, config_path: Path | None) -> Callable[[Message], Message]:
    """`package.module:function`, looked up with the config file's directory on the import path.
    The function takes and returns a `proton.Message` (returning None keeps the message)."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise RoutingConfigError(f"transformer {spec!r}: expected 'package.module:function'")
    if config_path is not None:
        folder = str(Path(config_path).resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as e:
        raise RoutingConfigError(f"transformer {spec!r} cannot be loaded: {e}") from None

    def transform(message: Message) -> Message:
        pm = ProtonMessage()
        pm.decode(message.encoded)
        result = func(pm)
        encoded = bytes((result if result is not None else pm).encode())
        copy = Message(encoded, codec.Envelope(encoded), message.address, message.routing_type,
                       message.container_id, message.arrival, message.id)
        copy.hops = message.hops
        return copy

    return transform
