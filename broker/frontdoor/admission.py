"""Counting client sockets against `[server] max_connections` from accept to close.

Every socket the broker holds for a client counts, whatever stage it is in: a TLS handshake, a
WebSocket upgrade, SASL, or an open AMQP connection. The count is taken once, at accept, by the
first protocol object on the socket (`Server.admissions.admit`); each layer that hands the socket on
(TLS to WebSocket or AMQP, WebSocket to AMQP) hands the same `Admission` with it (`hand_over`),
and whichever layer holds it when the socket ends gives it back. So a socket is never counted
twice, and never stops counting while the broker still holds it.

Over the limit: the socket is let through its TLS handshake and upgrade so that the client
hears why, in an AMQP close with `amqp:resource-limit-exceeded` (contract, "Operations"), as a
plain AMQP socket does. Only so many, though: past the limit plus `overflow(limit)` a socket is
closed at accept (what Artemis does for all of them), so a flood of sockets that never
handshake cannot grow without bound either. The pre-AMQP stages are bounded in time: HANDSHAKE_DEADLINE_S for a TLS handshake
and for a WebSocket upgrade head (the idle timeout, when that is shorter).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..protocol.server import Server

log = logging.getLogger("hermod.server")

# A TLS handshake or WebSocket upgrade must finish within this. The order of the contract's
# protocol detection window (`detect_timeout_ms = 5000`): a real client takes milliseconds.
HANDSHAKE_DEADLINE_S = 5.0
# Sockets over max_connections held long enough to be told so in AMQP: max_connections more,
# and at least this many (a small limit must still answer a burst of clients properly).
OVERFLOW_MIN = 1024


def overflow(limit: int) -> int:
    """How many sockets over `limit` are let through to hear the AMQP refusal."""
    return max(limit, OVERFLOW_MIN)


def handshake_deadline_s(idle_timeout_s: float) -> float:
    """The time a TLS handshake or WebSocket upgrade may take: HANDSHAKE_DEADLINE_S, or the idle
    timeout when that is set shorter."""
    return min(HANDSHAKE_DEADLINE_S, idle_timeout_s) if idle_timeout_s > 0 else HANDSHAKE_DEADLINE_S


class Admission:
    """One accepted socket's place in the count; `release` (idempotent) gives it back."""

    __slots__ = ("admissions", "over", "released")

    def __init__(self, admissions: Admissions, over: bool):
        self.admissions = admissions
        self.over = over  # beyond max_connections at accept: refused once its AMQP open arrives
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.admissions.held -= 1


class Admissions:
    """The server's count of client sockets held, in any stage, from accept to close."""

    def __init__(self, server: Server):
        self.server = server
        self.held = 0
        self._closed = 0  # closed at accept since the last log line about it
        self._logged_at = float("-inf")

    def admit(self, peer: str) -> Admission | None:
        """Count a socket just accepted. None: it is past the limit and its overflow, and the
        caller closes it now."""
        limit = self.server.broker.config.server.max_connections
        held = self.held + 1
        if held > limit + overflow(limit):
            self._closed_at_accept(peer, limit)
            return None
        self.held = held
        over = held > limit
        if over:
            log.warning("connection from %s refused: max_connections (%d) reached", peer, limit)
        return Admission(self, over)

    def _closed_at_accept(self, peer: str, limit: int) -> None:
        """One log line a second at most: a flood of sockets must not become a flood of lines."""
        self._closed += 1
        now = self.server.loop.time()
        if now - self._logged_at >= 1.0:
            log.warning("connection from %s closed at accept (%d since the last such line): %d sockets held, "
                        "max_connections %d", peer, self._closed, self.held, limit)
            self._logged_at = now
            self._closed = 0


def hand_over(protocol, transport, admission: Admission | None) -> None:
    """Start the next layer's protocol on `transport`, with the socket's place in the count."""
    protocol.admission = admission
    protocol.connection_made(transport)


def peer_of(transport) -> str:
    peer = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"
