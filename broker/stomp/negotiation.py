"""Version and heart-beat negotiation of the CONNECT / CONNECTED exchange (specification,
"Protocol Negotiation" and "Heart-beating")."""

from __future__ import annotations

import re

from .errors import StompError, UnsupportedVersion
from .frames import VERSIONS

_INTERVAL = re.compile(r"\s*([0-9]{1,10})\s*")


def negotiate_version(accept_version: str | None, supported: tuple[str, ...] = VERSIONS) -> str:
    """The highest version both sides speak. No `accept-version` header means a 1.0 client.
    Raises `UnsupportedVersion` (its `supported` for the ERROR frame's `version` header)."""
    if accept_version is None:
        offered = {"1.0"}
    else:
        offered = {v.strip() for v in accept_version.split(",")}
    for version in sorted(supported, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True):
        if version in offered:
            return version
    raise UnsupportedVersion(accept_version or "", supported)


def parse_heart_beat(value: str | None) -> tuple[int, int]:
    """A `heart-beat` header `x,y` as two non-negative millisecond counts; absent is `0,0`."""
    if value is None:
        return 0, 0
    parts = value.split(",")
    matches = [_INTERVAL.fullmatch(p) for p in parts]
    if len(parts) != 2 or matches[0] is None or matches[1] is None:
        raise StompError(f"heart-beat must be two non-negative integers 'cx,cy', not {value[:40]!r}")
    return int(matches[0].group(1)), int(matches[1].group(1))


def negotiate_heart_beat(client: str | None, server: tuple[int, int]) -> tuple[int, int]:
    """The broker's two intervals in milliseconds, (send, receive), 0 meaning none.

    The client's `cx,cy` says it can send every cx ms and wants to receive every cy ms; the
    broker's `sx,sy` the same from its side. The broker sends every max(sx, cy) unless either is
    0, and expects the client's beats every max(cx, sy) unless either is 0."""
    cx, cy = parse_heart_beat(client)
    sx, sy = server
    send = 0 if sx == 0 or cy == 0 else max(sx, cy)
    receive = 0 if cx == 0 or sy == 0 else max(cx, sy)
    return send, receive
