"""An outgoing AMQP 1.0 connection with one sending link: what a bridge forwards on.

The same engine as the server side (a `pn_transport` + `pn_collector` driven through the
binding's cffi layer on the broker's own asyncio loop, see connection.py), in client mode. TLS is
asyncio's `ssl` (Hermod owns the socket, as on the server side); SASL is Proton's client (PLAIN
with a user, else ANONYMOUS). Proton does not know the socket is encrypted, so PLAIN is allowed
"insecure" here: whether a password may cross plain TCP is the operator's choice of amqp://.

This module knows sockets, frames and outcomes, nothing of queues. It tells its `owner`:
`link_up()` (the remote attached our target), `credit_changed()`, `outcome(token, kind,
failed, undeliverable, condition)` for every delivery the remote settles (`condition`: a
rejected outcome's (name, description), else None), and `down(reason)` once, when
the connection is over for whatever cause (connect error, SASL refusal, a close or detach
from the remote, idle timeout, socket loss).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl

import cproton
from cproton_ffi import ffi, lib

from .transport_input import push_input

log = logging.getLogger("hermod.bridge")

READ_CHUNK = 256 * 1024
CONNECT_TIMEOUT_S = 10.0
NO_IDLE_TIMEOUT_OPEN_S = 30.0  # how long the open may take when there is no idle timeout
MAX_FRAME = 1024 * 1024
OUT_BUFFER = 64 * 1024

ACCEPTED, REJECTED, RELEASED, MODIFIED = "accepted", "rejected", "released", "modified"
_TERMINAL = {lib.PN_ACCEPTED: ACCEPTED, lib.PN_REJECTED: REJECTED, lib.PN_RELEASED: RELEASED,
             lib.PN_MODIFIED: MODIFIED}


def _condition_text(cond) -> str | None:
    if cond == ffi.NULL or not lib.pn_condition_is_set(cond):
        return None
    name = cproton.pn_condition_get_name(cond) or "error"
    description = cproton.pn_condition_get_description(cond)
    return f"{name}: {description}" if description else name


def _condition_of(cond) -> tuple[str, str] | None:
    """(name, description) of a rejected outcome's error, None when it carries none."""
    if cond == ffi.NULL or not lib.pn_condition_is_set(cond):
        return None
    return cproton.pn_condition_get_name(cond) or "", cproton.pn_condition_get_description(cond) or ""


class OutgoingConnection(asyncio.Protocol):
    """One client connection, one session, one sender link to `target` on the remote."""

    def __init__(self, loop: asyncio.AbstractEventLoop, owner, host: str, port: int, *,
                 ssl_context: ssl.SSLContext | None, user: str | None, password: str | None,
                 container_id: str, link_name: str, source: str, target: str, idle_timeout_s: float = 60):
        self.loop = loop
        self.owner = owner
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.user, self.password = user, password
        self.container_id = container_id
        self.link_name, self.source, self.target = link_name, source, target
        # Ours ([server] idle_timeout_s, as for clients); the remote's is honoured by ticking.
        # It also bounds the wait for the remote's open and attach: Proton's idle timeout runs
        # only once the open is exchanged, and a silent peer would hold the bridge for ever.
        self.idle_timeout_s = idle_timeout_s
        self._open_deadline = None
        self.socket = None
        self.over = False  # down() was reported (or close() asked): nothing more happens
        self.attached = False
        self.unsettled: dict = {}  # pn_delivery_t* -> the owner's token
        self._tag = ffi.new("uint64_t[1]")
        self._tag_ptr = ffi.cast("char *", self._tag)
        self._flush_scheduled = False
        self._tick_handle = None
        self._out = ffi.new("char[]", OUT_BUFFER)
        self.conn = lib.pn_connection()
        self.transport = lib.pn_transport()
        self.collector = lib.pn_collector()
        self.link = None
        self.sasl = None

    # -- connecting ------------------------------------------------------------------------------
    def start(self) -> None:
        self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await asyncio.wait_for(self.loop.create_connection(
                lambda: self, self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context is not None else None),
                CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            self._not_connected(f"connect to {self.host}:{self.port} timed out")
        except ssl.SSLError as e:
            self._not_connected(f"TLS with {self.host}:{self.port} failed: {e.reason or e}")
        except OSError as e:
            self._not_connected(f"cannot connect to {self.host}:{self.port}: {e.strerror or e}")

    def _not_connected(self, reason: str) -> None:
        if self.over:  # closed while connecting: only the engine is left to free
            self._release()
        else:
            self._down(reason)

    def connection_made(self, socket_transport) -> None:
        if self.over:  # closed while connecting
            socket_transport.abort()
            return
        self.socket = socket_transport
        sock = socket_transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t, c = self.transport, self.conn
        self.sasl = sasl = lib.pn_sasl(t)
        cproton.pn_sasl_allowed_mechs(sasl, "PLAIN" if self.user else "ANONYMOUS")
        lib.pn_sasl_set_allow_insecure_mechs(sasl, True)
        if self.user:
            cproton.pn_connection_set_user(c, self.user)
            cproton.pn_connection_set_password(c, self.password or "")
        cproton.pn_connection_set_hostname(c, self.host)
        cproton.pn_connection_set_container(c, self.container_id)
        lib.pn_transport_set_idle_timeout(t, int(self.idle_timeout_s * 1000))
        self._open_deadline = self.loop.call_later(self.idle_timeout_s or NO_IDLE_TIMEOUT_OPEN_S,
                                                   self._not_open_in_time)
        lib.pn_transport_set_max_frame(t, MAX_FRAME)
        lib.pn_connection_collect(c, self.collector)
        lib.pn_transport_bind(t, c)
        lib.pn_connection_open(c)
        session = lib.pn_session(c)
        lib.pn_session_open(session)
        link = lib.pn_sender(session, self.link_name.encode())
        cproton.pn_terminus_set_address(lib.pn_link_target(link), self.target)
        cproton.pn_terminus_set_address(lib.pn_link_source(link), self.source)
        lib.pn_terminus_set_durability(lib.pn_link_target(link), lib.PN_DELIVERIES)
        lib.pn_link_set_snd_settle_mode(link, lib.PN_SND_UNSETTLED)
        lib.pn_link_set_rcv_settle_mode(link, lib.PN_RCV_FIRST)
        lib.pn_link_open(link)
        self.link = link
        self._process()

    def _not_open_in_time(self) -> None:
        self._open_deadline = None
        if not self.attached and not self.over:
            self._down(f"{self.host}:{self.port} did not open an AMQP connection and link in time")

    # -- input -----------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.over:
            return
        push_input(self.transport, data, self._process, lambda: self.over)
        self._process()

    def eof_received(self) -> bool:
        if not self.over:
            lib.pn_transport_close_tail(self.transport)
            self._process()
        return False

    def connection_lost(self, exc) -> None:
        if not self.over:
            reason = f"connection to {self.host}:{self.port} lost"
            self._down(self._transport_reason(f"{reason}: {exc}" if exc else reason))
        self._release()

    def _process(self) -> None:
        col = self.collector
        while not self.over:
            ev = lib.pn_collector_peek(col)
            if ev == ffi.NULL:
                break
            kind = lib.pn_event_type(ev)
            if kind == lib.PN_DELIVERY:
                self._on_delivery(lib.pn_event_delivery(ev))
            elif kind == lib.PN_LINK_FLOW:
                if self.attached:
                    self.owner.credit_changed()
            elif kind == lib.PN_LINK_REMOTE_OPEN:
                self._on_attach()
            elif kind in (lib.PN_LINK_REMOTE_CLOSE, lib.PN_LINK_REMOTE_DETACH):
                why = _condition_text(lib.pn_link_remote_condition(self.link))
                self._down(f"the remote detached the link: {why or 'no reason given'}")
            elif kind == lib.PN_CONNECTION_REMOTE_CLOSE:
                why = _condition_text(lib.pn_connection_remote_condition(self.conn))
                self._down(f"the remote closed the connection: {why or 'no reason given'}")
            elif kind == lib.PN_TRANSPORT_ERROR:
                self._down(self._transport_reason("transport error"))
            elif kind == lib.PN_TRANSPORT_CLOSED:
                self._down(self._transport_reason("connection closed"))
            if self.over:
                break
            lib.pn_collector_pop(col)
        self._schedule_flush()

    def _transport_reason(self, default: str) -> str:
        """Why the transport ended: a refused SASL login (first: over TLS the socket's end
        sets a condition of its own), its condition, or `default`."""
        outcome = lib.pn_sasl_outcome(self.sasl) if self.sasl is not None else lib.PN_SASL_NONE
        if outcome not in (lib.PN_SASL_NONE, lib.PN_SASL_OK):
            return f"amqp:unauthorized-access: the remote refused the SASL login (outcome {outcome})"
        return _condition_text(lib.pn_transport_condition(self.transport)) or default

    def _on_attach(self) -> None:
        # A refused attach comes back with no target, then a detach with the reason.
        if lib.pn_terminus_get_type(lib.pn_link_remote_target(self.link)) == lib.PN_UNSPECIFIED:
            return
        self.attached = True
        self.owner.link_up()

    def _on_delivery(self, d) -> None:
        if not lib.pn_delivery_updated(d):
            return
        kind = _TERMINAL.get(lib.pn_delivery_remote_state(d))
        if kind is None:
            if lib.pn_delivery_settled(d):  # settled with no outcome: the remote's default
                kind = ACCEPTED
            else:
                return  # a received state: not an outcome yet
        token = self.unsettled.pop(d, None)
        failed = undeliverable = False
        condition = None
        if kind == MODIFIED:
            disp = lib.pn_delivery_remote(d)
            failed = bool(lib.pn_disposition_is_failed(disp))
            undeliverable = bool(lib.pn_disposition_is_undeliverable(disp))
        elif kind == REJECTED:
            condition = _condition_of(lib.pn_disposition_condition(lib.pn_delivery_remote(d)))
        lib.pn_delivery_settle(d)
        if token is not None:
            self.owner.outcome(token, kind, failed, undeliverable, condition)

    # -- output ----------------------------------------------------------------------------------
    @property
    def credit(self) -> int:
        return lib.pn_link_credit(self.link) if self.attached and not self.over else 0

    def send(self, data: bytes, token) -> None:
        """One message, unsettled; `token` comes back with its outcome."""
        link = self.link
        self._tag[0] += 1
        d = lib.pn_delivery(link, (8, self._tag_ptr))
        lib.pn_link_send(link, data, len(data))
        lib.pn_link_advance(link)
        self.unsettled[d] = token
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and not self.over:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.over or self.socket is None:
            return
        t = self.transport
        while True:
            pending = lib.pn_transport_pending(t)
            if pending < 0:
                self._down(self._transport_reason("connection closed"))
                return
            if pending == 0:
                break
            n = lib.pn_transport_peek(t, self._out, min(pending, OUT_BUFFER))
            if n < 0:
                break
            self.socket.write(ffi.buffer(self._out, n)[:])
            lib.pn_transport_pop(t, n)
        self._arm_tick()

    def _arm_tick(self) -> None:
        """One timer at the transport's next deadline: our idle timeout, or an empty frame the
        remote's idle timeout asks for."""
        if self._tick_handle is not None:
            return
        deadline = lib.pn_transport_tick(self.transport, int(self.loop.time() * 1000))
        if deadline:
            self._tick_handle = self.loop.call_at(deadline / 1000.0, self._on_tick)

    def _on_tick(self) -> None:
        self._tick_handle = None
        if self.over:
            return
        lib.pn_transport_tick(self.transport, int(self.loop.time() * 1000))
        self._process()

    # -- the end ---------------------------------------------------------------------------------
    def _down(self, reason: str) -> None:
        """Report the end once, and drop the socket (whatever is unsettled is the owner's)."""
        if self.over:
            return
        self.over = True
        self.attached = False
        self.unsettled.clear()
        if self.socket is not None:
            self.socket.abort()
        else:
            self._release()
        self.owner.down(reason)

    def close(self) -> None:
        """The broker stops: an AMQP close to the remote, written before the socket closes.
        Nothing is reported to the owner."""
        if self.over:
            return
        self.over = True
        if self.socket is None:
            self._release()
            return
        if lib.pn_connection_state(self.conn) & lib.PN_LOCAL_ACTIVE:
            lib.pn_connection_close(self.conn)
        t = self.transport
        pending = lib.pn_transport_pending(t)
        while pending > 0:
            n = lib.pn_transport_peek(t, self._out, min(pending, OUT_BUFFER))
            if n <= 0:
                break
            self.socket.write(ffi.buffer(self._out, n)[:])
            lib.pn_transport_pop(t, n)
            pending = lib.pn_transport_pending(t)
        self.socket.close()  # asyncio writes what it buffered first

    def _release(self) -> None:
        for handle in (self._tick_handle, self._open_deadline):
            if handle is not None:
                handle.cancel()
        self._tick_handle = self._open_deadline = None
        if self.transport is not None:
            lib.pn_transport_unbind(self.transport)
            lib.pn_decref(self.transport)
            lib.pn_connection_release(self.conn)
            lib.pn_decref(self.conn)
            lib.pn_collector_free(self.collector)
            self.transport = self.conn = self.collector = None
            self.link = self.sasl = None


__all__ = ["OutgoingConnection", "ACCEPTED", "REJECTED", "RELEASED", "MODIFIED"]
