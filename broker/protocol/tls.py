"""TLS with Python's `ssl` in asyncio (not Proton's pn_ssl: Hermod owns the socket).

Each TLS connection is accepted by a `TlsAcceptor`, which runs the handshake with
`loop.start_tls` and only then hands the encrypted transport to a `Connection`. Doing the
handshake here (rather than `create_server(ssl=...)`) gives every failure (plain AMQP sent to a
TLS port, a client certificate that does not verify, a handshake the client aborts or never
finishes) one log line naming the peer; asyncio itself logs these only in debug mode. A failure
closes that connection only.

The certificate, key and CA are read again on SIGHUP (`reload`) into a new SSLContext that the
acceptors take for every later handshake; open connections carry on, except those whose client
certificate no longer verifies against the new CA (`certificate_check`, revocation.py).
"""
from __future__ import annotations

import asyncio
import logging
import ssl

from ..config import TlsConfig

log = logging.getLogger("hermod.tls")

HANDSHAKE_TIMEOUT_S = 30.0
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
    """Runs one server-side TLS handshake, then hands the connection to `make()`'s protocol."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ctx: ssl.SSLContext, listener_name: str, make):
        self.loop = loop
        self.ctx = ctx
        self.listener_name = listener_name
        self.make = make
        self.task: asyncio.Task | None = None
        self.early: list[bytes] = []  # read after the handshake, before the hand-over
        self.eof = False

    def connection_made(self, transport) -> None:
        transport.pause_reading()  # start_tls takes over the reading
        self.task = self.loop.create_task(self._handshake(transport))

    async def _handshake(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        where = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            secure = await self.loop.start_tls(transport, self, self.ctx, server_side=True,
                                               ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as e:
            log.warning("TLS handshake with %s on listener %s failed: %s", where, self.listener_name,
                        e or type(e).__name__)
            transport.abort()
            return
        if secure is None:  # the client went away during the handshake
            log.warning("TLS handshake with %s on listener %s aborted by the client", where, self.listener_name)
            return
        if secure.is_closing():
            return
        protocol = self.make()
        secure.set_protocol(protocol)
        protocol.connection_made(secure)
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
        pass  # a handshake that fails raises in _handshake, which logs it
