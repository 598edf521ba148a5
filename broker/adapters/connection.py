"""What every non-AMQP client connection shares, whatever its protocol: its place in the
`max_connections` count (handed over by the front door), its registration with the server (so
`/api/connections` lists it with its protocol, management can close it and a stop closes it),
the login through the throttle and the per-user connection limit, with the same log line and
audit record as an AMQP login, and bounded output (reading pauses while the socket's write
buffer is over its high-water mark, so a client that does not read cannot grow the broker).

A protocol subclasses `ClientConnection` and implements `received(data)`, `describe_links()`,
`refuse_and_close(reason)` (its own goodbye: an OpenWire ConnectionError, a STOMP ERROR frame,
an MQTT DISCONNECT with a reason code) and `on_closed()` (give back what the connection held:
consumers' unacknowledged messages, temporary destinations, transactions).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..frontdoor.admission import peer_of
from ..security.auth import ANONYMOUS

if TYPE_CHECKING:
    from ..security.auth import Principal

log = logging.getLogger("hermod.server")

WRITE_HIGH_WATER = 1024 * 1024  # bytes queued to a socket before its consumers stop getting more


class ClientConnection(asyncio.Protocol):
    """One client of a protocol other than AMQP, from hand-over to close."""

    protocol_name = "?"  # "openwire", "stomp", "mqtt": the `protocol` of /api/connections

    def __init__(self, server, listener) -> None:
        self.server = server  # protocol.server.Server: loop, admissions, `clients`
        self.broker = server.broker
        self.listener = listener  # config.ListenerConfig, or None for [server]'s own
        self.admission = None  # handed over by the front door (or TLS/WebSocket before it)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.principal: Principal | None = None
        self.client_id: str | None = None  # the protocol's client/container id, once known
        self.closed = False
        self.writable = True  # False while the socket's write buffer is over its mark
        # Bytes of a command, frame or packet still arriving, counted against max_memory_mb.
        self.unfinished = 0

    # -- asyncio Protocol ------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = peer_of(transport)
        if self.admission is None:  # accepted here (a listener without the front door)
            self.admission = self.server.admissions.admit(self.peer)
            if self.admission is None:
                self.closed = True
                transport.abort()
                return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.server.clients.add(self)
        log.debug("%s connection from %s", self.protocol_name, self.peer)

    def data_received(self, data: bytes) -> None:
        if not self.closed:
            self.received(data)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost follows

    def pause_writing(self) -> None:
        self.writable = False
        self.writability_changed()

    def resume_writing(self) -> None:
        self.writable = True
        self.writability_changed()

    def connection_lost(self, exc) -> None:
        if self.closed and self.transport is None:
            return
        self.closed = True
        try:
            self.on_closed(exc)
        finally:
            self.hold_unfinished(0)
            if self.principal is not None:
                self.broker.auth.disconnect(self.principal)
                self.principal = None
            if self.admission is not None:
                self.admission.release()
                self.admission = None
            self.server.clients.discard(self)
            self.transport = None

    # -- what subclasses use ----------------------------------------------------------------------
    @property
    def host(self) -> str:
        """The client's address without its port: what the login throttle counts by."""
        return self.peer.rsplit(":", 1)[0]

    @property
    def over_connection_limit(self) -> bool:
        """Was this socket accepted beyond `max_connections`? Then the protocol refuses its
        connect in its own words (and closes)."""
        return self.admission is not None and self.admission.over

    async def login(self, user: str | None, password: str | None) -> tuple[Principal | None, str]:
        """Check a protocol's user name and password against `[security]` users as SASL PLAIN
        is (throttled, off the loop; no user name: the anonymous login where allowed) and count
        the connection against `max_connections_per_user`. (principal, "") or (None, why)."""
        broker = self.broker
        if user is None and password is None and broker.auth.anonymous:
            principal: Principal | None = ANONYMOUS
        else:
            principal = await broker.logins.check_plain(self.host, user, password)
        if self.closed:
            return None, "connection closed"
        if principal is None:
            log.warning("%s connection %s: login failed for user %r (failure %d from %s)", self.protocol_name,
                        self.peer, user, broker.logins.failures(self.host), self.host)
            broker.audit("login_failed", peer=self.peer, user=user, reason="bad credentials", via=self.protocol_name)
            return None, "bad user name or password"
        if not broker.auth.connect(principal):
            log.warning("%s connection %s: user %s is at its connection limit (%d); refused", self.protocol_name,
                        self.peer, principal.name, broker.auth.max_connections)
            broker.audit("connection_limit", peer=self.peer, user=principal.name, via=self.protocol_name)
            return None, "connection limit reached for this user"
        self.principal = principal
        broker.audit("login", peer=self.peer, user=principal.name, mechanism="PLAIN", via=self.protocol_name)
        return principal, ""

    def hold_unfinished(self, nbytes: int) -> bool:
        """Count `nbytes` (what the parser holds of a command, frame or packet not yet complete)
        against the broker's memory limit in place of what was counted before (contract: every
        byte held for a client counts). False, and nothing more counted, when that would pass the
        limit: the protocol refuses and closes the connection in its own words."""
        flow = self.broker.postoffice.flow
        delta = nbytes - self.unfinished
        if delta > 0:
            if not flow.reserve(delta):
                return False
        elif delta < 0:
            flow.release(-delta)
        self.unfinished = nbytes
        return True

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def close(self) -> None:
        """Close after what was written has gone."""
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.close()

    def abort(self) -> None:
        transport = self.transport
        if transport is not None:
            transport.abort()

    @property
    def max_message_size(self) -> int:
        """The contract's bound on one command, frame or packet (AMQP's message bound)."""
        return self.broker.config.server.max_message_size

    # -- management and the server ----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """This connection as `/api/connections` lists it (the view adds the id)."""
        principal = self.principal
        return {"remote": self.peer, "user": principal.name if principal is not None else None,
                "protocol": self.protocol_name, "container_id": self.client_id,
                "listener": self.listener.name if self.listener is not None else "main",
                "links": self.describe_links()}

    def close_by_management(self) -> None:
        log.info("closing %s connection from %s (management)", self.protocol_name, self.peer)
        self.refuse_and_close("closed by management")

    def shutdown(self) -> None:
        """The broker is stopping."""
        self.refuse_and_close("the broker is shutting down")

    # -- for subclasses -----------------------------------------------------------------------------
    def received(self, data: bytes) -> None:
        raise NotImplementedError

    def describe_links(self) -> list[dict]:
        return []

    def refuse_and_close(self, reason: str) -> None:
        self.close()

    def revalidate(self) -> int:
        """After a reload (protocol/revocation.py; `principal` already holds the user's new
        roles): end what the new permissions no longer allow (a subscription, a producer), in
        the protocol's own words; how many things ended. Record what each was allowed with
        `broker.authorization.recording()` around its decision."""
        return 0

    def writability_changed(self) -> None:
        """`writable` changed: consumers stop (or resume) getting messages."""

    def on_closed(self, exc: BaseException | None) -> None:
        """The socket is gone: give back what the connection held."""


__all__ = ["ClientConnection", "WRITE_HIGH_WATER"]
