"""TLS with Python's `ssl` in asyncio (not Proton's pn_ssl: Hermod owns the socket).

Each TLS connection is accepted by a `TlsAcceptor`, which runs the handshake with
`loop.start_tls` and only then hands the encrypted transport to a `Connection`. Doing the
handshake here (rather than `create_server(ssl=...)`) gives every failure (plain AMQP sent to a
TLS port, a client certificate that does not verify, a handshake the client aborts or never
finishes within the handshake deadline, frontdoor/admission.py) one log line naming the peer;
asyncio itself logs these only in debug mode. A failure closes that connection only.

The certificate, key and CA are read again on SIGHUP (`reload`) into a new SSLContext that the
acceptors take for every later handshake; open connections carry on, except those whose client
certificate no longer verifies against the new CA (`certificate_check`, revocation.py).
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING

from ..config import TlsConfig
from ..frontdoor.admission import Admission, hand_over, handshake_deadline_s, peer_of

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("hermod.tls")

_VERIFY = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(cfg: TlsConfig) -> ssl.SSLContext:
    """Raises OSError / ssl.SSLError with the file named, for a one-line start-up error."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(ctx, cfg)
    ctx.verify_mode = _VERIFY[cfg.client_certificates]
    return ctx


def _load(ctx: ssl.SSLContext, cfg: TlsConfig) -> None:
    try:
        ctx.load_cert_chain(cfg.cert, cfg.key)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"tls: cannot load certificate {cfg.cert} / key {cfg.key}: {e}") from None
    if cfg.ca is not None:
        try:
            ctx.load_verify_locations(cafile=cfg.ca)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"tls.ca: cannot load {cfg.ca}: {e}") from None
    elif cfg.client_certificates != "none":
        raise ValueError("tls.client_certificates needs tls.ca to verify them against")


def reload(server, cfg: TlsConfig) -> bool:
    """Read the certificate, key and CA again (SIGHUP) into a new context that every later
    handshake uses: a CA taken out of `ca` is gone from it (loading into the running context
    would only add). A bad file keeps the old context. True when the new one is in place."""
    try:
        ctx = server_context(cfg)
    except ValueError as e:
        log.error("certificate reload failed, keeping the current one: %s", e)
        return False
    server.tls_context = ctx
    log.info("TLS certificate reloaded from %s", cfg.cert)
    return True


def certificate_check(cfg: TlsConfig):
    """After a reload: a predicate `ok(conn)` that is False for a connection whose client
    certificate no longer verifies against `cfg.ca`, and the bundle to close after use; None
    when no client certificates are asked for."""
    if cfg.ca is None or cfg.client_certificates == "none":
        return None
    from .tls_verify import CaBundle, peer_certificate
    bundle = CaBundle(cfg.ca)

    def ok(conn) -> bool:
        der = peer_certificate(conn)
        return der is None or bundle.verifies(der)

    return ok, bundle


class TlsAcceptor(asyncio.Protocol):
    """Runs one server-side TLS handshake, then hands the connection to `make()`'s protocol.
    The socket counts toward max_connections from accept (frontdoor/admission.py), and the
    handshake must finish within the handshake deadline."""

    def __init__(self, server: Server, ctx: ssl.SSLContext, listener_name: str, make):
        self.server = server
        self.loop = server.loop
        self.ctx = ctx
        self.listener_name = listener_name
        self.make = make
        self.task: asyncio.Task | None = None
        self.early: list[bytes] = []  # read after the handshake, before the hand-over
        self.eof = False
        self.admission: Admission | None = None

    def connection_made(self, transport) -> None:
        self.admission = self.server.admissions.admit(peer_of(transport))
        if self.admission is None:  # far past max_connections: no handshake at all
            transport.abort()
            return
        transport.pause_reading()  # start_tls takes over the reading
        self.task = self.loop.create_task(self._handshake(transport))

    async def _handshake(self, transport) -> None:
        where = peer_of(transport)
        admission = self.admission
        deadline = handshake_deadline_s(self.server.broker.config.server.idle_timeout_s)
        try:
            secure = await self.loop.start_tls(transport, self, self.ctx, server_side=True,
                                               ssl_handshake_timeout=deadline)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as e:
            log.warning("TLS handshake with %s on listener %s failed: %s", where, self.listener_name,
                        e or type(e).__name__)
            transport.abort()
            admission.release()
            return
        if secure is None:  # the client went away during the handshake
            log.warning("TLS handshake with %s on listener %s aborted by the client", where, self.listener_name)
            admission.release()
            return
        if secure.is_closing():
            admission.release()
            return
        self.admission = None  # the next layer holds the socket's place now
        protocol = self.make()
        secure.set_protocol(protocol)
        hand_over(protocol, secure, admission)
        for data in self.early:
            protocol.data_received(data)
        self.early.clear()
        if self.eof and not protocol.eof_received():
            secure.close()

    def data_received(self, data: bytes) -> None:
        self.early.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        return True

    def connection_lost(self, exc) -> None:
        # A handshake that fails raises in _handshake, which logs it; a socket lost before the
        # hand-over gives its place back here too (release is idempotent).
        if self.admission is not None:
            self.admission.release()
