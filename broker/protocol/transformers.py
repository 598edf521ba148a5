"""Divert transformers: the one place a divert copy becomes a `proton.Message`.

A `[[divert]] transformer = "package.module:function"` is user code written against Proton's
message class, so loading it belongs to the protocol adapter; `broker/routing.py` translates the
rest of the divert configuration without knowing Proton and takes this loader as a parameter.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Callable

from proton import Message as ProtonMessage

from ..core.message import Message
from ..routing import RoutingConfigError
from . import codec


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
