"""Which protocols other than AMQP the front door hands connections to, and how each
connection's protocol object is made. A protocol joins by adding its entry to `_MAKERS` (and so
to `SERVED`, which the permission matrix test reads: a served protocol must have its cells)."""
from __future__ import annotations

from typing import Callable

Maker = Callable[[object, object], object]  # (server, listener) -> asyncio.Protocol


def _makers() -> dict[str, Maker]:
    makers: dict[str, Maker] = {}
    # e.g. from .openwire.connection import OpenWireConnection; makers["openwire"] = OpenWireConnection
    return makers


_MAKERS = _makers()
SERVED: tuple[str, ...] = tuple(_MAKERS)


def factories(server, listener) -> dict[str, Callable[[], object]]:
    """For the front door: protocol name -> a maker of one connection's protocol object."""
    def bind(make: Maker) -> Callable[[], object]:
        return lambda: make(server, listener)
    return {name: bind(make) for name, make in _MAKERS.items()}


__all__ = ["SERVED", "factories"]
