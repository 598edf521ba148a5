"""The asyncio loop that runs the broker: the listener, the readiness line, signals and a
graceful stop, and the once-per-turn dispatch + output flush.

Everything runs on this one thread. The store's writer thread hands completions back with
`loop.call_soon_threadsafe`; the core has no locks.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys

from cproton_ffi import ffi

from ..adapters import registry as adapters_registry
from ..frontdoor.admission import Admissions
from .connection import OUT_CHUNK, Connection
from .connections_view import ConnectionsView
from .management import ManagementEndpoint

log = logging.getLogger("hermod.server")

# The protocols with an adapter the front door hands connections to; the others enabled in a
# listener's `protocols` are detected and closed with a log line. The permission matrix test
# requires entry paths for each protocol here (tests/security/test_permission_matrix.py).
SERVED_PROTOCOLS = ("amqp", *adapters_registry.SERVED)


class Server:
    def __init__(self, broker, loop: asyncio.AbstractEventLoop):
        self.broker = broker
        self.loop = loop
        self.connections: set[Connection] = set()
        # Connections of the other protocols (adapters/connection.py ClientConnection).
        self.clients: set = set()
        # Client sockets held in any stage (TLS handshake, WebSocket upgrade, SASL, AMQP), from
        # accept to close: what max_connections limits.
        self.admissions = Admissions(self)
        self.management = ManagementEndpoint(broker)
        broker.management.connections = ConnectionsView(self)  # the connection list's port
        self.draining: set = set()  # consumer links that asked to drain their credit
        self._marked: dict[Connection, None] = {}
        self._flush_scheduled = False
        self._listener: asyncio.base_events.Server | None = None
        self._extra_listeners: list = []
        self.tls_context = None  # one SSLContext for every TLS listener, reloaded on SIGHUP (reload.py)
        # [ha] shared-store (broker.ha): what a connection's open may say or be refused with;
        # None without HA.
        self.gate = None
        self._stopping = asyncio.Event()
        self.stop_reason = ""
        self._scan = None
        self._out = ffi.new("char[]", 64 * 1024)
        self._out_size = 64 * 1024
        cfg = broker.config.server
        # How often queues are scanned for expired messages (Artemis: message-expiry-scan-period).
        self.expiry_scan_s = cfg.expiry_scan_ms / 1000.0
        broker.postoffice.after_dispatch.append(self.flush)

    # -- output batching -----------------------------------------------------------------------
    def mark(self, conn: Connection) -> None:
        """This connection has output (or events) to write at the end of this turn."""
        conn.marked = True
        self._marked[conn] = None
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._turn)

    def out_buffer(self, pending: int):
        """The one buffer every connection copies its output through (all on this thread):
        grown up to OUT_CHUNK for big output, never one per connection."""
        if pending > self._out_size and self._out_size < OUT_CHUNK:
            self._out_size = min(max(pending, self._out_size * 2), OUT_CHUNK)
            self._out = ffi.new("char[]", self._out_size)
        return self._out, self._out_size

    def unmark(self, conn: Connection) -> None:
        self._marked.pop(conn, None)

    def _turn(self) -> None:
        self._flush_scheduled = False
        self.broker.postoffice.run_dispatch()  # also flushes, through after_dispatch

    def flush(self) -> None:
        if self.draining:
            draining, self.draining = self.draining, set()
            for link in draining:
                link.drained()
        while self._marked:
            marked, self._marked = self._marked, {}
            for conn in marked:
                conn.marked = False
                try:
                    conn.flush()
                except Exception:  # noqa: BLE001 - a broken socket must not stop the others
                    log.exception("flush failed for %s", conn.peer)

    # -- lifecycle -----------------------------------------------------------------------------
    def _expiry_scan(self) -> None:
        """Expired messages are found on dispatch, and by this scan on queues nobody reads."""
        try:
            self.broker.postoffice.expire_scan()
            self.flush()
        finally:
            self._scan = self.loop.call_later(self.expiry_scan_s, self._expiry_scan)

    async def start(self, host: str, port: int, listener=None) -> tuple[str, int]:
        """The main listener ([server]); `listener` carries its TLS and mechanisms."""
        self._scan = self.loop.call_later(self.expiry_scan_s, self._expiry_scan)
        self._listener = await self._listen(host, port, listener)
        sock = self._listener.sockets[0].getsockname()
        return sock[0], sock[1]

    async def start_listener(self, listener) -> tuple[str, int]:
        """A [[listener]] entry."""
        server = await self._listen(listener.host, listener.port, listener)
        self._extra_listeners.append(server)
        sock = server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def _listen(self, host: str, port: int, listener):
        if listener is not None and listener.websocket:
            from .websocket import websocket_factory
            # AMQP, STOMP or MQTT inside WebSocket (inside TLS: wss), by subprotocol
            make = websocket_factory(self, listener, adapters_registry.factories(self, listener))
        else:
            make = self._front_door(listener)
        if listener is not None and listener.tls:
            from .tls import TlsAcceptor
            name, inner = listener.name, make
            # The context as it is at each accept: a reload replaces it (tls.reload).
            factory = lambda: TlsAcceptor(self, self.tls_context, name, inner)  # noqa: E731
        else:
            factory = make
        return await self.loop.create_server(factory, host, port, reuse_address=True, backlog=1024)

    def _front_door(self, listener):
        """Every plain (or TLS) connection starts at the front door (frontdoor/door.py), which
        detects its protocol and hands it to that protocol's adapter."""
        from ..frontdoor.detect import AMQP
        from ..frontdoor.door import FrontDoor
        cfg = listener if listener is not None else self.broker.config.main_listener()
        adapters = {AMQP: lambda: Connection(self, listener), **adapters_registry.factories(self, listener)}
        assert tuple(adapters) == SERVED_PROTOCOLS
        name, protocols, timeout_s = cfg.name, cfg.protocols, cfg.detect_timeout_ms / 1000.0
        return lambda: FrontDoor(self, name, protocols, adapters, timeout_s)

    def listener_names(self) -> list[str]:
        """Every listener the broker runs, by name ("main" is [server])."""
        return ["main", *(l.name for l in self.broker.config.extra_listeners())]

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop serving; `reason` is the shutdown log line's (a signal, a lost lease)."""
        if not self._stopping.is_set():
            self.stop_reason = reason
        self._stopping.set()

    def install_signal_handlers(self) -> None:
        """Before the readiness line: a SIGTERM right after it must still stop gracefully."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.loop.add_signal_handler(sig, self.request_stop, f"{sig.name} received")
            except (NotImplementedError, RuntimeError):
                pass

    async def serve_until_stopped(self) -> None:
        await self._stopping.wait()
        log.info("hermod stopping (%s): closing %d connection(s)", self.stop_reason,
                 len(self.connections) + len(self.clients))
        await self.stop()

    async def stop(self) -> None:
        """Stop accepting, send every client an AMQP close, let the output go, then finish."""
        if self._listener is not None:
            self._listener.close()
        for listener in self._extra_listeners:
            listener.close()
        if self._scan is not None:
            self._scan.cancel()
        for conn in list(self.connections):
            conn.shutdown()
        for client in list(self.clients):
            client.shutdown()
        self.flush()
        for _ in range(50):  # up to ~1 s for clients to read their close
            if not any(c.socket and c.socket.get_write_buffer_size() for c in self.connections) and \
                    not any(c.transport and c.transport.get_write_buffer_size() for c in self.clients):
                break
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            if conn.socket is not None:
                conn.socket.close()
        for client in list(self.clients):
            client.abort()
        await asyncio.sleep(0)
        self.broker.close()


def print_ready(host: str, port: int, scheme: str = "amqp") -> None:
    sys.stdout.write(f"hermod listening on {scheme}://{host}:{port}\n")
    sys.stdout.flush()


def print_listener(name: str, scheme: str, host: str, port: int) -> None:
    sys.stdout.write(f"hermod listener {name} on {scheme}://{host}:{port}\n")
    sys.stdout.flush()
