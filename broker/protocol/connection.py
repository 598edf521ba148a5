"""One client connection: an asyncio Protocol that owns a socket and drives one Proton
`pn_transport` + `pn_collector` through the binding's cffi layer.

Why not Proton's `Container`: it wraps and dispatches every engine event in Python objects
before any handler runs, which caps a broker at 2-11k msg/s; reading events as integers from our
own collector moved 83-93k msg/s on the same machine (reference/proton-hot-path.md). Proton still
does all of AMQP here (framing, SASL, sessions, links, credit, settlement); this module does the
IO and the event switch.

Input: socket bytes are pushed into the transport in capacity-sized pieces, then every engine
event is handled. Output: after each batch of work the connection is marked, and the server
flushes every marked connection once per loop turn (`Server.flush`).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import ffi, lib
from proton._data import PropertyDict, SymbolList, obj2dat, symbol

from .. import __version__
from . import conditions
from .conditions import set_condition
from .links import open_link
from .sasl import open_gate

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("hermod.connection")

READ_CHUNK = 256 * 1024
TICK_EVERY_MS = 100
WRITE_HIGH_WATER = 4 * 1024 * 1024

E = lib  # event type constants live on the lib
_CONNECTION_REMOTE_OPEN = E.PN_CONNECTION_REMOTE_OPEN
_CONNECTION_REMOTE_CLOSE = E.PN_CONNECTION_REMOTE_CLOSE
_SESSION_REMOTE_OPEN = E.PN_SESSION_REMOTE_OPEN
_SESSION_REMOTE_CLOSE = E.PN_SESSION_REMOTE_CLOSE
_LINK_REMOTE_OPEN = E.PN_LINK_REMOTE_OPEN
_LINK_REMOTE_CLOSE = E.PN_LINK_REMOTE_CLOSE
_LINK_REMOTE_DETACH = E.PN_LINK_REMOTE_DETACH
_LINK_FLOW = E.PN_LINK_FLOW
_DELIVERY = E.PN_DELIVERY
_TRANSPORT_ERROR = E.PN_TRANSPORT_ERROR
_TRANSPORT_CLOSED = E.PN_TRANSPORT_CLOSED
_TRANSPORT_TAIL_CLOSED = E.PN_TRANSPORT_TAIL_CLOSED


class Connection:
    """asyncio Protocol for one AMQP connection."""

    def __init__(self, server: Server, listener=None):
        self.server = server
        self.broker = server.broker
        self.listener = listener  # the [[listener]] this connection came in on (None: [server])
        self.principal = None  # who logged in (security.auth.Principal), set by the SASL gate
        self.gate = None  # the SASL layer in front of Proton until the login succeeds
        self.socket = None
        self.peer = "?"
        self.closed = False
        self.writing_paused = False
        self.links: dict = {}  # pn_link_t* -> ProducerLink | ConsumerLink
        self.container_id: str | None = None
        self.opened = False
        self.marked = False  # output to flush at the end of this loop turn
        self._last_tick = 0
        self._tick_handle = None
        self._tick_deadline = 0
        self.conn = lib.pn_connection()
        self.transport = lib.pn_transport()
        self.collector = lib.pn_collector()
        self._out = ffi.new("char[]", 64 * 1024)
        self._out_size = 64 * 1024

    # -- asyncio Protocol -----------------------------------------------------------------------
    def connection_made(self, socket_transport) -> None:
        self.socket = socket_transport
        peer = socket_transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        cfg = self.broker.config.server
        t = self.transport
        lib.pn_transport_set_server(t)
        # No pn_sasl: Hermod runs the SASL exchange itself (protocol/sasl.py); Proton sees the
        # stream from the AMQP header on, and only once the login succeeded.
        self.gate = open_gate(self, socket_transport)
        lib.pn_transport_set_idle_timeout(t, int(cfg.idle_timeout_s * 1000))
        lib.pn_transport_set_max_frame(t, self.listener.max_frame_size if self.listener else cfg.max_frame_size)
        lib.pn_connection_collect(self.conn, self.collector)
        lib.pn_transport_bind(t, self.conn)
        self.server.connections.add(self)
        # Proton's idle timeout only runs once the AMQP open is exchanged: a peer that stalls in
        # the protocol header or SASL would otherwise hold the socket for ever.
        self._tick_handle = self.server.loop.call_later(cfg.idle_timeout_s if cfg.idle_timeout_s > 0 else 30.0,
                                                        self._handshake_deadline)
        log.debug("connection from %s", self.peer)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self.gate is not None:
            data = self.gate.feed(data)
            if not data:
                return
            self.gate = None
        t = self.transport
        pos, n = 0, len(data)
        while pos < n:
            capacity = lib.pn_transport_capacity(t)
            if capacity < 0:
                break  # input side closed; the rest is ignored
            if capacity == 0:
                self.process()
                capacity = lib.pn_transport_capacity(t)
                if capacity <= 0:
                    break
            piece = data[pos:pos + capacity] if (pos or n > capacity) else data
            pushed = lib.pn_transport_push(t, piece, len(piece))
            if pushed < 0:
                break
            pos += pushed
        self.process()

    def eof_received(self) -> bool:
        if self.gate is not None:
            return False  # still in SASL: nothing for Proton; close
        lib.pn_transport_close_tail(self.transport)
        self.process()
        return False

    def connection_lost(self, exc) -> None:
        if not self.closed:
            lib.pn_transport_close_tail(self.transport)
            lib.pn_transport_close_head(self.transport)
            try:
                self.process()
            except Exception:  # noqa: BLE001 - tearing down anyway
                log.exception("error while closing connection %s", self.peer)
        self._release()

    def pause_writing(self) -> None:
        self.writing_paused = True
        for handler in self.links.values():
            handler.set_blocked(True)

    def resume_writing(self) -> None:
        self.writing_paused = False
        for handler in self.links.values():
            handler.set_blocked(False)

    # -- engine events --------------------------------------------------------------------------
    def process(self) -> None:
        """Handle every pending engine event, then ask for a flush. A producer link is drained
        once per batch, however many transfers arrived on it (its first event would drain all)."""
        col = self.collector
        peek, pop, etype = lib.pn_collector_peek, lib.pn_collector_pop, lib.pn_event_type
        links = self.links
        producers: dict = {}
        while True:
            ev = peek(col)
            if ev == ffi.NULL:
                break
            kind = etype(ev)
            try:
                if kind == _DELIVERY:
                    d = lib.pn_event_delivery(ev)
                    link = lib.pn_delivery_link(d)
                    handler = links.get(link)
                    if handler is not None:
                        if handler.is_producer:
                            producers[link] = handler
                        else:
                            if producers and handler.after_transfers:
                                self._drain(producers)  # a discharge must see the sends before it
                            handler.on_delivery(d)
                elif kind == _LINK_FLOW:
                    handler = links.get(lib.pn_event_link(ev))
                    if handler is not None:
                        handler.on_flow()
                else:
                    if producers:  # transfers before a detach or close are taken first
                        self._drain(producers)
                    self._on_endpoint_event(kind, ev)
            except Exception:  # noqa: BLE001 - one bad event must not take the broker down
                log.exception("error handling %s on %s", cproton.pn_event_type_name(kind), self.peer)
                self._close_with(conditions.INTERNAL_ERROR, "internal error")
            pop(col)
        if producers:
            self._drain(producers)
        if not self.marked:
            self.server.mark(self)

    def _drain(self, producers: dict) -> None:
        for link, handler in list(producers.items()):
            if self.links.get(link) is handler:
                try:
                    handler.on_delivery(None)
                except Exception:  # noqa: BLE001 - as above
                    log.exception("error receiving on %s", self.peer)
                    self._close_with(conditions.INTERNAL_ERROR, "internal error")
        producers.clear()

    def _on_endpoint_event(self, kind: int, ev) -> None:
        if kind == _CONNECTION_REMOTE_OPEN:
            self._on_open()
        elif kind == _SESSION_REMOTE_OPEN:
            s = lib.pn_event_session(ev)
            if lib.pn_session_state(s) & lib.PN_LOCAL_UNINIT:
                lib.pn_session_open(s)
        elif kind == _LINK_REMOTE_OPEN:
            link = lib.pn_event_link(ev)
            if lib.pn_link_state(link) & lib.PN_LOCAL_UNINIT:
                handler = open_link(self, link)
                if handler is not None:
                    self.links[link] = handler
        elif kind == _LINK_REMOTE_CLOSE or kind == _LINK_REMOTE_DETACH:
            link = lib.pn_event_link(ev)
            handler = self.links.pop(link, None)
            closed = kind == _LINK_REMOTE_CLOSE
            if handler is not None:
                handler.on_detach(closed=closed)
            if lib.pn_link_state(link) & lib.PN_LOCAL_ACTIVE:
                (lib.pn_link_close if closed else lib.pn_link_detach)(link)
            # Free the engine's link (and its deliveries) once both ends are done with it, or a
            # long-lived connection that opens and closes links would grow without bound.
            lib.pn_link_free(link)
        elif kind == _SESSION_REMOTE_CLOSE:
            s = lib.pn_event_session(ev)
            self._detach_links(lambda link: lib.pn_link_session(link) == s, session_end=True)
            if lib.pn_session_state(s) & lib.PN_LOCAL_ACTIVE:
                lib.pn_session_close(s)
        elif kind == _CONNECTION_REMOTE_CLOSE:
            self._detach_links(lambda link: True, session_end=True)
            if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
                lib.pn_connection_close(self.conn)
        elif kind == _TRANSPORT_ERROR:
            cond = lib.pn_transport_condition(self.transport)
            log.info("connection %s: %s %s", self.peer, cproton.pn_condition_get_name(cond),
                     cproton.pn_condition_get_description(cond))
        elif kind == _TRANSPORT_CLOSED:
            self._detach_links(lambda link: True, session_end=True)

    def _on_open(self) -> None:
        self.opened = True
        c = self.conn
        self.container_id = cproton.pn_connection_remote_container(c)
        cproton.pn_connection_set_container(c, self.broker.container_id)
        obj2dat(SymbolList([symbol("ANONYMOUS-RELAY"), symbol("DELAYED_DELIVERY"), symbol("SHARED-SUBS")]),
                lib.pn_connection_offered_capabilities(c))
        obj2dat(PropertyDict({symbol("product"): "hermod", symbol("version"): __version__}),
                lib.pn_connection_properties(c))
        lib.pn_connection_open(c)

    def _detach_links(self, which, session_end: bool) -> None:
        for link in [l for l in self.links if which(l)]:
            handler = self.links.pop(link)
            handler.on_detach(closed=False, session_end=session_end)

    def _close_with(self, name: str, description: str) -> None:
        cond = lib.pn_connection_condition(self.conn)
        set_condition(cond, name, description)
        if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
            lib.pn_connection_close(self.conn)
        self.server.mark(self)

    def shutdown(self) -> None:
        """Graceful stop: send the client an AMQP close."""
        self._detach_links(lambda link: True, session_end=True)
        self._close_with(conditions.CONNECTION_FORCED, "broker shutting down")

    # -- output ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write all the transport's pending output, and re-arm the idle-timeout tick."""
        if self.closed:
            return
        t = self.transport
        write = self.socket.write
        while True:
            pending = lib.pn_transport_pending(t)
            if pending < 0:
                # Output side done: everything is written.
                self.socket.close()
                self.closed = True
                return
            if pending == 0:
                break
            if pending > self._out_size:
                self._out_size = min(max(pending, self._out_size * 2), 16 * 1024 * 1024)
                self._out = ffi.new("char[]", self._out_size)
            n = min(pending, self._out_size)
            n = lib.pn_transport_peek(t, self._out, n)
            if n < 0:
                break
            write(ffi.buffer(self._out, n)[:])
            lib.pn_transport_pop(t, n)
        self._arm_tick()

    def _handshake_deadline(self) -> None:
        self._tick_handle = None
        if not self.closed and not self.opened:
            log.info("connection %s did not open in time; dropping it", self.peer)
            self.socket.close()
        else:
            self._arm_tick()

    def _arm_tick(self) -> None:
        loop = self.server.loop
        now = int(loop.time() * 1000)
        if now - self._last_tick < TICK_EVERY_MS and self._tick_handle is not None:
            return  # idle-timeout deadlines move by seconds: no need to ask on every flush
        self._last_tick = now
        deadline = lib.pn_transport_tick(self.transport, now)
        if deadline and deadline != self._tick_deadline and self.opened:
            if self._tick_handle is not None:
                self._tick_handle.cancel()
            self._tick_deadline = deadline
            self._tick_handle = loop.call_at(deadline / 1000.0, self._on_tick)

    def _on_tick(self) -> None:
        self._tick_handle = None
        self._tick_deadline = 0
        if self.closed:
            return
        lib.pn_transport_tick(self.transport, int(self.server.loop.time() * 1000))
        self.process()

    def _release(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        self._detach_links(lambda link: True, session_end=True)
        if self.principal is not None:  # counted by the SASL gate (connections per user)
            self.broker.auth.disconnect(self.principal)
            self.principal = None
        self.closed = True
        self.server.connections.discard(self)
        self.server.unmark(self)
        if self.transport is not None:
            lib.pn_transport_unbind(self.transport)
            lib.pn_decref(self.transport)
            lib.pn_connection_release(self.conn)
            lib.pn_decref(self.conn)  # release + decref is pn_connection_free (not exported)
            lib.pn_collector_free(self.collector)
            self.transport = self.conn = self.collector = None


__all__ = ["Connection"]
