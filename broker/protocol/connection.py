"""One client connection: an asyncio Protocol that owns a socket and drives one Proton
`pn_transport` + `pn_collector` through the binding's cffi layer.

Why not Proton's `Container`: it wraps and dispatches every engine event in Python objects
before any handler runs, which caps a broker at 2-11k msg/s; reading events as integers from our
own collector moved 83-93k msg/s on the same machine (ARCHITECTURE.md, "Design facts"). Proton still
does all of AMQP here (framing, SASL, sessions, links, credit, settlement); this module does the
IO and the event switch.

Input: socket bytes are pushed into the transport in capacity-sized pieces, then every engine
event is handled: each link's events go to its handler through the one link-handler interface
(protocol/handler.py). Output: after each batch of work the connection is marked, and the server
flushes every marked connection once per loop turn (`Server.flush`).

Split by concern: this module is the socket, the event pump, the connection's life and the
store hold; connection_limits.py the begin and attach within `[server]`'s limits;
connection_output.py the flush, output back-pressure and the timers.
"""
from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import ffi, lib
# The per-message calls bound by name: a `lib.` attribute lookup costs about a quarter of
# a trivial cffi call, and the hot path makes some 25 of them per message. Q1 100k x 1 KiB:
# 1.31 -> 1.27 broker CPU s per 100k, 76k -> 78k msg/s (medians of 5, interleaved, load 0.6-0.7).
from cproton_ffi.lib import pn_event_delivery, pn_event_link
from .binding import PropertyDict, SymbolList, obj2dat, symbol

from .. import __version__
from . import conditions
from ..frontdoor.admission import peer_of
from ..core.flow import FRAMES_SHARE, PartialFrame
from .expiry import ExpiryWaits
from .recovery import FrameTap
from .conditions import set_condition
from .connection_limits import ConnectionLimits
from .connection_output import (KEEPALIVE_SHARE, OUT_CHUNK, OUTPUT_BUDGET, SOCKET_SEND_BUFFER, WRITE_HIGH_WATER,
                                ConnectionOutput)
from .sasl import open_gate
from .storehold import StoreHold
from .transport_input import push_input

if TYPE_CHECKING:
    from .coordinator import ConnectionTransactions
    from .server import Server

log = logging.getLogger("hermod.connection")

READ_CHUNK = 256 * 1024

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


class Connection(ConnectionLimits, ConnectionOutput):
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
        # OUTPUT_BUDGET less the message bytes handed to Proton and not yet framed onto the
        # socket (ConsumerLink.send subtracts, `flush` recounts): below 0, the consumers wait.
        self.out_room = OUTPUT_BUDGET
        self.output_full = False
        self.links: dict = {}  # pn_link_t* -> its LinkHandler (protocol/handler.py)
        # pn_link_t* -> the rights its attach was allowed, asked again on a reload (revocation.py)
        self.link_rights: dict = {}
        # Consumer links holding acknowledgements read in this batch of events, handed to
        # their queues in one go (ConsumerLink.take_acks) before the next endpoint event and
        # at the end of the batch.
        self.acking: list = []
        self.expiry_waits = ExpiryWaits()  # kept termini waiting for a session end or the close
        self.frame_tap = FrameTap()  # attach unsettled maps in and out (link recovery)
        # The frame the client has begun and not finished (in Proton's input buffer), counted
        # against max_memory_mb (issue 28, finding 12).
        self.partial_frame = PartialFrame(self.broker.postoffice.flow)
        # Its transactions, and the deliveries they hold: made by the first coordinator link
        # (protocol/coordinator.py); any session and link of the connection may use them.
        self.transactions: ConnectionTransactions | None = None
        self.container_id: str | None = None
        self.opened = False
        self.marked = False  # output to flush at the end of this loop turn
        # Client settlements (acknowledgements) on their way to the store, and the output taken
        # after each was read: held until it is stored (protocol/storehold.py).
        self.store_hold = StoreHold()
        self._last_tick = 0
        self._tick_handle = None
        self._tick_deadline = 0
        self._handshake_handle = None
        self._keepalive_s = 0.0  # a third of the idle timeout the peer advertised; 0: none
        self._keepalive_handle = None
        self._last_write = 0.0
        self.sessions = 0  # sessions the peer began and has not ended
        self.engine_links = 0  # links the peer attached and has not detached (refused ones too)
        self.refused = False  # over max_connections: closed as soon as it is open
        # Its place in the max_connections count (frontdoor/admission.py): handed over by the
        # TLS or WebSocket layer that accepted the socket, or taken in connection_made.
        self.admission = None
        self.tail_closed = False  # we closed the transport's input (EOF, teardown, over a limit)
        self.conn = lib.pn_connection()
        self.transport = lib.pn_transport()
        self.collector = lib.pn_collector()

    # -- asyncio Protocol -----------------------------------------------------------------------
    def connection_made(self, socket_transport) -> None:
        self.socket = socket_transport
        self.peer = peer_of(socket_transport)
        if self.admission is None:  # accepted here: a plain AMQP listener
            self.admission = self.server.admissions.admit(self.peer)
            if self.admission is None:  # far past max_connections: closed at accept
                self.closed = True
                socket_transport.abort()
                return
        socket_transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        sock = socket_transport.get_extra_info("socket")
        if sock is not None and SOCKET_SEND_BUFFER:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER)
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
        # Over max_connections when it was accepted (counted from accept, TLS handshake and
        # WebSocket upgrade included): answered with a close once the client's open arrives.
        self.refused = self.admission.over
        # Proton's idle timeout only runs once the AMQP open is exchanged: a peer that stalls in
        # the protocol header or SASL would otherwise hold the socket for ever.
        self._handshake_handle = self.server.loop.call_later(
            cfg.idle_timeout_s if cfg.idle_timeout_s > 0 else 30.0, self._handshake_deadline)
        log.debug("connection from %s", self.peer)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self.gate is not None:
            data = self.gate.feed(data)
            if not data:
                return
            self.gate = None
        if self.tail_closed:
            return  # refused or ended: nothing more goes to Proton
        self.frame_tap.incoming(data)
        if not self.partial_frame.hold(self.frame_tap.unfinished_in()):
            self._refuse_partial_frame(data)
            return
        push_input(self.transport, data, self.process)
        self.process()

    def _refuse_partial_frame(self, data: bytes) -> None:
        """The frame being received would take unfinished frames over their share of the memory
        limit (core.flow PartialFrame): the frames complete before it are taken, then the
        connection is closed with amqp:resource-limit-exceeded, its frame never buffered."""
        unfinished = self.frame_tap.unfinished_in()
        complete = data[:max(0, len(data) - unfinished)]
        if complete:
            push_input(self.transport, complete, self.process)
        flow = self.partial_frame.flow
        log.warning("connection %s closed: its unfinished frame of %d bytes so far would take unfinished frames "
                    "over their share of max_memory_mb", self.peer, unfinished)
        description = (f"a frame of {unfinished} bytes so far would take the frames clients have not finished over "
                       f"{FRAMES_SHARE:.0%} of max_memory_mb ({flow.memory_limit} bytes)")
        self._detach_links(lambda link: True, session_end=True)
        self._close_with(conditions.RESOURCE_LIMIT_EXCEEDED, description)
        # Also the transport's condition, which Proton's close carries: otherwise the truncated
        # frame left in its input names the close (framing-error) when the tail closes.
        set_condition(lib.pn_transport_condition(self.transport), conditions.RESOURCE_LIMIT_EXCEEDED, description)
        self._close_tail()
        self.process()

    def eof_received(self) -> bool:
        if self.gate is not None:
            return False  # still in SASL: nothing for Proton; close
        self._close_tail()
        self.process()
        return False

    def connection_lost(self, exc) -> None:
        if self.gate is not None:
            self.gate.abandon()  # a login waiting for its turn (security/throttle.py) is dropped
        if not self.closed:
            self._close_tail()
            lib.pn_transport_close_head(self.transport)
            try:
                self.process()
            except Exception:  # noqa: BLE001 - tearing down anyway
                log.exception("error while closing connection %s", self.peer)
        self._release()

    # -- engine events --------------------------------------------------------------------------
    def process(self) -> None:
        """Handle every pending engine event, then ask for a flush. A producer link is drained
        once per batch, however many transfers arrived on it (its first event would drain all)."""
        col = self.collector
        peek, pop, etype = lib.pn_collector_peek, lib.pn_collector_pop, lib.pn_event_type
        # Module globals read once a batch, not per event (~2 events a message). With the same
        # hoisting in ProducerLink.on_delivery and Dispatch._dispatch_one: Q1 150k x 1 KiB, 10
        # interleaved reps (load 1.6-2.0), broker CPU s per 100k median 0.903 -> 0.893 (~1%).
        null, delivery, link_flow, event_link, event_delivery = \
            ffi.NULL, _DELIVERY, _LINK_FLOW, pn_event_link, pn_event_delivery
        links = self.links
        producers: dict = {}
        while True:
            ev = peek(col)
            if ev == null:
                break
            kind = etype(ev)
            try:
                if kind == delivery:
                    # The delivery's link straight from the event; the delivery itself only
                    # where it is used (a producer's transfers are drained from its link).
                    link = event_link(ev)
                    handler = links.get(link)
                    if handler is None:
                        self._unowned_delivery(link, event_delivery(ev))
                    elif handler.batches_transfers:
                        producers[link] = handler
                    else:
                        if producers and handler.after_transfers:
                            self._drain(producers)  # a discharge must see the sends before it
                        handler.on_delivery(event_delivery(ev))
                elif kind == link_flow:
                    handler = links.get(event_link(ev))
                    if handler is not None:
                        handler.on_flow()
                else:
                    if producers:  # transfers before a detach or close are taken first
                        self._drain(producers)
                    if self.acking:  # so are acknowledgements
                        self._take_acks()
                    self._on_endpoint_event(kind, ev)
            except Exception:  # noqa: BLE001 - one bad event must not take the broker down
                log.exception("error handling %s on %s", cproton.pn_event_type_name(kind), self.peer)
                self._close_with(conditions.INTERNAL_ERROR, "internal error")
            pop(col)
        if producers:
            self._drain(producers)
        if self.acking:
            self._take_acks()
        if not self.marked:
            self.server.mark(self)

    def _take_acks(self) -> None:
        acking, self.acking = self.acking, []
        for handler in acking:
            try:
                handler.take_acks()
            except Exception:  # noqa: BLE001 - as in process
                log.exception("error acknowledging on %s", self.peer)
                self._close_with(conditions.INTERNAL_ERROR, "internal error")

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
            self._on_begin(lib.pn_event_session(ev))
        elif kind == _LINK_REMOTE_OPEN:
            self._on_attach(lib.pn_event_link(ev))
        elif kind == _LINK_REMOTE_CLOSE or kind == _LINK_REMOTE_DETACH:
            link = lib.pn_event_link(ev)
            self.engine_links -= 1
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
            self.expiry_waits.session_ended(s)
            if lib.pn_session_state(s) & lib.PN_LOCAL_ACTIVE:
                lib.pn_session_close(s)
            # Free the engine's session (and any links left on it) once the peer ended it, or
            # a connection that begins and ends sessions would grow without bound.
            self.engine_links -= self._links_left_on(s)
            self.sessions -= 1
            lib.pn_session_free(s)
        elif kind == _CONNECTION_REMOTE_CLOSE:
            self._detach_links(lambda link: True, session_end=True)
            if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
                lib.pn_connection_close(self.conn)
        elif kind == _TRANSPORT_ERROR:
            cond = lib.pn_transport_condition(self.transport)
            log.info("connection %s: %s %s", self.peer, cproton.pn_condition_get_name(cond),
                     cproton.pn_condition_get_description(cond))
        elif kind == _TRANSPORT_TAIL_CLOSED:
            self._on_tail_closed()
        elif kind == _TRANSPORT_CLOSED:
            self._detach_links(lambda link: True, session_end=True)

    def _close_tail(self) -> None:
        self.tail_closed = True
        lib.pn_transport_close_tail(self.transport)

    def _on_tail_closed(self) -> None:
        """Proton 0.40 closes its input without a word when it cannot dispatch a frame (a
        performative whose body is null or not a list, an unknown or symbolic descriptor, a
        field it cannot decode): no condition, no close frame, and the connection would sit
        silent until the client hung up or the handshake deadline. Neither we nor a close frame
        from the peer ended the input here, so it is that case: give the transport a condition
        and close its tail ourselves, which makes Proton send an open (if it had none) and a
        close carrying it; `flush` then closes the socket once that is written."""
        if self.tail_closed or lib.pn_connection_state(self.conn) & lib.PN_REMOTE_CLOSED:
            return
        cond = lib.pn_transport_condition(self.transport)
        if not lib.pn_condition_is_set(cond):  # Proton already named the fault
            set_condition(cond, conditions.DECODE_ERROR,
                          "a frame could not be decoded or is not a valid AMQP performative")
        self._detach_links(lambda link: True, session_end=True)
        self._close_tail()  # reported as a transport error, logged below
        self.server.mark(self)

    def _on_open(self) -> None:
        self.opened = True
        c = self.conn
        self.container_id = cproton.pn_connection_remote_container(c)
        cproton.pn_connection_set_container(c, self.broker.container_id)
        obj2dat(SymbolList([symbol("ANONYMOUS-RELAY"), symbol("DELAYED_DELIVERY"), symbol("SHARED-SUBS")]),
                lib.pn_connection_offered_capabilities(c))
        gate = self.server.gate
        properties = {symbol("product"): "hermod", symbol("version"): __version__}
        if gate is not None:
            properties.update(gate.open_properties())  # failover-server-list on a live broker
        obj2dat(PropertyDict(properties), lib.pn_connection_properties(c))
        lib.pn_connection_open(c)
        if self.refused:
            self._close_with(conditions.RESOURCE_LIMIT_EXCEEDED,
                             f"too many connections (max_connections "
                             f"{self.broker.config.server.max_connections})")
            return
        refusal = gate.refusal() if gate is not None else None
        if refusal is not None:  # a backup's redirect, or a live broker that lost its lease
            self._close_with(*refusal)
            return
        remote_idle_ms = lib.pn_transport_get_remote_idle_timeout(self.transport)
        if remote_idle_ms:
            self._keepalive_s = remote_idle_ms / 1000.0 / KEEPALIVE_SHARE
            self._last_write = self.server.loop.time()
            self._keepalive_handle = self.server.loop.call_later(self._keepalive_s, self._keepalive)

    def end_link(self, handler, condition: str, description: str) -> None:
        """Close a link for its client's fault (credit ignored, a message too big): what the
        client still sends on it is thrown away as it arrives, never buffered."""
        link = handler.link
        log.info("closing link %s of %s: %s %s", handler.name, self.peer, condition, description)
        set_condition(lib.pn_link_condition(link), condition, description)
        lib.pn_link_close(link)
        self.links.pop(link, None)
        handler.on_detach(closed=True)
        self.discard(link)
        self.server.mark(self)

    def _unowned_delivery(self, link, d) -> None:
        """A transfer or disposition on a link with no handler: one we refused or closed.
        Nothing on it is kept: transfers are thrown away as they come."""
        if lib.pn_link_is_receiver(link):
            self.discard(link)
        elif lib.pn_delivery_settled(d):
            lib.pn_delivery_settle(d)

    def discard(self, link) -> None:
        """Settle (and so free) every transfer queued on a link we no longer read; Proton then
        ignores the rest of a multi-frame one."""
        current = lib.pn_link_current
        d = current(link)
        while d != ffi.NULL:
            moved = lib.pn_link_advance(link)  # drops its bytes
            lib.pn_delivery_settle(d)
            if not moved:
                break
            d = current(link)

    def _detach_links(self, which, session_end: bool) -> None:
        for link in [lk for lk in self.links if which(lk)]:
            handler = self.links.pop(link)
            handler.on_detach(closed=False, session_end=session_end)

    def _close_with(self, name: str, description: str, info=None) -> None:
        cond = lib.pn_connection_condition(self.conn)
        set_condition(cond, name, description)
        if info is not None:
            obj2dat(info, lib.pn_condition_info(cond))
        if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
            lib.pn_connection_close(self.conn)
        self.server.mark(self)

    def shutdown(self) -> None:
        """Graceful stop: send the client an AMQP close."""
        self._detach_links(lambda link: True, session_end=True)
        self._close_with(conditions.CONNECTION_FORCED, "broker shutting down")

    def hold_for_store(self) -> int:
        """A settlement of this client just read is being stored: output taken from now on
        waits for it. Its epoch, for `release_store_hold`."""
        return self.store_hold.begin()

    def release_store_hold(self, epoch: int) -> None:
        if self.store_hold.end(epoch) and not self.closed and self.store_hold.holding:
            self.server.mark(self)  # the flush writes what no longer waits

    def _release(self) -> None:
        for handle in (self._tick_handle, self._handshake_handle, self._keepalive_handle):
            if handle is not None:
                handle.cancel()
        self._tick_handle = self._handshake_handle = self._keepalive_handle = None
        self._detach_links(lambda link: True, session_end=True)
        self.expiry_waits.connection_closed()
        if self.principal is not None:  # counted by the SASL gate (connections per user)
            self.broker.auth.disconnect(self.principal)
            self.principal = None
        self.closed = True
        self.partial_frame.drop()
        if self.admission is not None:
            self.admission.release()
        self.server.connections.discard(self)
        self.server.unmark(self)
        if self.transport is not None:
            lib.pn_transport_unbind(self.transport)
            lib.pn_decref(self.transport)
            lib.pn_connection_release(self.conn)
            lib.pn_decref(self.conn)  # release + decref is pn_connection_free (not exported)
            lib.pn_collector_free(self.collector)
            self.transport = self.conn = self.collector = None


__all__ = ["OUT_CHUNK", "Connection"]
