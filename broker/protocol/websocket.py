"""AMQP over WebSocket (the OASIS AMQP WebSocket Binding) on a `[[listener]] websocket = true`,
and the other protocols the listener serves by their subprotocols (`v12.stomp`, `mqtt`, ...:
`SUBPROTOCOLS`), whose connections (adapters/) get the payloads the same way.

The binding is thin: an HTTP/1.1 upgrade that offers the subprotocol `amqp` (on any path), then
binary WebSocket messages whose payloads, joined, are the ordinary AMQP byte stream: protocol
headers, SASL frames and AMQP frames, with no alignment between WebSocket messages and AMQP
frames. So the WebSocket layer sits below everything else and the AMQP `Connection` does not know
it is there: `WebSocketAcceptor` is the asyncio protocol on the socket (or on the TLS transport,
which makes `wss`), runs the upgrade and the framing with wsproto (sans-IO), and hands the
`Connection` a `WebSocketChannel`, which looks like the socket transport it normally writes to.
Connection limits, heartbeats, the SASL gate and the audit log are therefore the same as on TCP.

Bounds, each of which closes that connection only, with one log line:
- the upgrade request head: at most MAX_UPGRADE_HEAD bytes, and complete within the handshake
  deadline (frontdoor/admission.py: 5 s, or the idle timeout when shorter); the socket counts
  toward max_connections from accept, upgraded or not;
- an upgrade whose `Origin` is present and not in the listener's `allowed_origins` gets a 403;
- a WebSocket frame: at most the listener's max_frame_size plus FRAME_SLACK payload bytes (a
  client may put a few AMQP frames in one WebSocket frame, never megabytes on a 512-byte
  listener), judged on the frame's header before any of its payload is read (`FrameLimit`).
  Payload is handed on as it arrives, so even an allowed frame is never buffered whole, and a
  message (a run of continuation frames) may be as long as the AMQP stream it carries;
- bytes that cannot start an HTTP request (plain AMQP or TLS on a ws:// port) are refused at once
  rather than waited on;
- text frames, unmasked client frames and other framing faults close with the WebSocket status
  the RFC gives them (1003, 1002).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.extensions import Extension
from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Message, Ping, RejectConnection,
                            RejectData, Request, TextMessage)
from wsproto.frame_protocol import CloseReason, Opcode, RsvBits
from wsproto.utilities import ProtocolError, RemoteProtocolError

from ..config import normalize_origin
from ..frontdoor.admission import Admission, hand_over, handshake_deadline_s, peer_of
from .connection import Connection

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("hermod.websocket")

SUBPROTOCOL = "amqp"
# WebSocket subprotocol -> the protocol it carries (contract, "Other protocols": detection).
SUBPROTOCOLS = {"amqp": "amqp", "v12.stomp": "stomp", "v11.stomp": "stomp", "v10.stomp": "stomp",
                "mqtt": "mqtt", "mqttv3.1": "mqtt"}
MAX_UPGRADE_HEAD = 16 * 1024
FRAME_SLACK = 64 * 1024
CLOSE_REPLY_WAIT_S = 5.0  # after our close frame, how long the client has to answer with its own
_REASONS = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}
_METHOD_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DATA_OPCODES = (Opcode.BINARY, Opcode.TEXT, Opcode.CONTINUATION)


class FrameLimit(Extension):
    """Refuses a data frame whose header announces more than `limit` payload bytes, before any
    of it is read. wsproto's extension hook sees every frame header; this "extension" is never
    offered or negotiated (no client names it), only switched on for the frame decoder."""

    name = "x-hermod-frame-limit"

    def __init__(self, limit: int):
        self.limit = limit
        self.refused: int | None = None  # the announced length of the frame it refused

    def enabled(self) -> bool:
        return True

    def offer(self) -> bool:
        return False

    def frame_inbound_header(self, proto, opcode, rsv, payload_length):
        if opcode in _DATA_OPCODES and payload_length > self.limit:
            self.refused = payload_length
            return CloseReason.MESSAGE_TOO_BIG
        return RsvBits(False, False, False)


class WebSocketChannel:
    """What the AMQP `Connection` writes to: the transport-like face of one upgraded connection.
    Every write becomes one binary WebSocket message; `close` starts the close handshake."""

    def __init__(self, acceptor: WebSocketAcceptor):
        self._acceptor = acceptor
        self._transport = acceptor.transport

    def write(self, data: bytes) -> None:
        self._acceptor.send_binary(data)

    def close(self) -> None:
        self._acceptor.close(CloseReason.NORMAL_CLOSURE, "")

    def abort(self) -> None:
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default=None):
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        self._transport.set_write_buffer_limits(high=high, low=low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()


class WebSocketAcceptor(asyncio.Protocol):
    """The server side of the WebSocket binding for one socket; after the upgrade, the AMQP
    `Connection` on top of it gets every binary payload byte as it arrives."""

    def __init__(self, server: Server, listener, adapters: dict | None = None):
        self.server = server
        self.listener = listener
        # protocol name -> maker of its connection object, for the protocols this listener
        # serves besides AMQP (adapters/registry.py)
        self.adapters = adapters or {}
        self.ws = WSConnection(ConnectionType.SERVER)
        self.transport = None
        self.conn = None  # the protocol's connection object once upgraded
        self.subprotocol: str | None = None
        # Text frames carry STOMP (browsers' STOMP clients send text); the others travel in binary.
        self.text_allowed = False
        self.peer = "?"
        self.head_bytes = 0  # received before the upgrade completed
        self.method_open = True  # still reading the request line's method
        self.frame_limit = FrameLimit(listener.max_frame_size + FRAME_SLACK)
        self.closing = False
        self._deadline = None
        # The socket's place in the max_connections count (frontdoor/admission.py): handed over
        # by the TLS layer (wss) or taken at accept; the AMQP Connection holds it once upgraded.
        self.admission: Admission | None = None

    # -- asyncio Protocol -----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = peer_of(transport)
        if self.admission is None:  # accepted here: a ws:// listener
            self.admission = self.server.admissions.admit(self.peer)
            if self.admission is None:  # far past max_connections: closed at accept
                self.closing = True
                transport.abort()
                return
        deadline = handshake_deadline_s(self.server.broker.config.server.idle_timeout_s)
        self._deadline = self.server.loop.call_later(deadline, self._upgrade_deadline)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        if self.conn is None:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_UPGRADE_HEAD:
                self._refuse(431, f"upgrade request head over {MAX_UPGRADE_HEAD} bytes")
                return
            if self.method_open and not self._method_plausible(data):
                self._refuse(400, f"not an HTTP request (starts {bytes(data[:8])!r})")
                return
        try:
            self.ws.receive_data(data)
        except RemoteProtocolError as e:
            self._refuse(e.event_hint.status_code if isinstance(e.event_hint, RejectConnection) else 400,
                         f"bad upgrade request: {e}")
            return
        for event in self.ws.events():
            if self.closing:
                return
            if isinstance(event, BytesMessage):
                self._on_binary(event)
            elif isinstance(event, Request):
                self._on_upgrade(event)
            elif isinstance(event, Ping):
                self._write(self.ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                self._on_close(event)
            elif isinstance(event, TextMessage):
                if self.text_allowed:
                    if event.data:
                        self.conn.data_received(event.data.encode())
                else:
                    self._fail(CloseReason.UNSUPPORTED_DATA, f"text frame ({self.subprotocol or 'AMQP'} travels "
                                                             "in binary frames)")

    def eof_received(self) -> bool:
        if self.conn is not None and not self.closing:
            self.conn.eof_received()
        return False

    def connection_lost(self, exc) -> None:
        self.closing = True
        self._cancel_deadline()
        if self.conn is not None:
            self.conn.connection_lost(exc)  # which gives the socket's place back
        elif self.admission is not None:
            self.admission.release()

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.pause_writing()

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.resume_writing()

    # -- the upgrade ----------------------------------------------------------------------------
    def _on_upgrade(self, request: Request) -> None:
        refused_origin = self._foreign_origin(request)
        if refused_origin is not None:
            self._refuse(403, f"origin {refused_origin!r} is not in the listener's allowed_origins")
            return
        chosen = self._subprotocol(request.subprotocols)
        if chosen is None:
            offered = ", ".join(request.subprotocols) or "none"
            served = ", ".join(s for s, p in SUBPROTOCOLS.items() if self._serves(p))
            self._refuse(400, f"upgrade offers no subprotocol this listener speaks ({served}; offered: {offered})")
            return
        self._cancel_deadline()  # the protocol connection's own handshake deadline takes over
        self._write(self.ws.send(AcceptConnection(subprotocol=chosen, extensions=[self.frame_limit])))
        log.debug("websocket upgrade from %s on listener %s, path %s, subprotocol %s", self.peer,
                  self.listener.name, request.target, chosen)
        protocol = SUBPROTOCOLS[chosen]
        self.subprotocol = chosen
        self.text_allowed = protocol == "stomp"
        self.conn = Connection(self.server, self.listener) if protocol == "amqp" else self.adapters[protocol]()
        admission, self.admission = self.admission, None
        hand_over(self.conn, WebSocketChannel(self), admission)

    def _serves(self, protocol: str) -> bool:
        return protocol in self.listener.protocols and (protocol == "amqp" or protocol in self.adapters)

    def _subprotocol(self, offered: list[str]) -> str | None:
        """The first subprotocol the client offers that this listener serves (the client lists
        them in its order of preference)."""
        for name in offered:
            protocol = SUBPROTOCOLS.get(name)
            if protocol is not None and self._serves(protocol):
                return name
        return None

    def _foreign_origin(self, request: Request) -> str | None:
        """The request's `Origin` when it is there and not one the listener allows (else None).
        A browser always sends `Origin` on a WebSocket upgrade, and lets any page open one to
        any host: without this check a page the user merely visits could drive the broker with
        the user's network position (and anonymous login). A client that is no browser sends
        no `Origin` and is served; several `Origin` headers are refused unless each is allowed."""
        allowed = self.listener.allowed_origins
        for name, value in request.extra_headers:
            if name.lower() == b"origin":
                origin = value.decode("latin-1")
                if normalize_origin(origin) not in allowed:
                    return origin
        return None

    def _method_plausible(self, data: bytes) -> bool:
        """The head starts with an HTTP method (capital letters) and a space: anything else (an
        AMQP or TLS header) will never become an upgrade, so it is refused now, not at the
        deadline."""
        for byte in data:
            if byte == 0x20:
                self.method_open = False
                return True
            if byte not in _METHOD_CHARS:
                return False
        return True

    def _refuse(self, status: int, why: str) -> None:
        """Answer a failed upgrade with an HTTP error and close."""
        log.warning("websocket connection from %s on listener %s refused: %s", self.peer, self.listener.name, why)
        self.closing = True
        self._cancel_deadline()
        body = (why + "\n").encode()
        try:
            self._write(self.ws.send(RejectConnection(
                status_code=status, has_body=True,
                headers=[(b"content-type", b"text/plain; charset=utf-8"),
                         (b"content-length", str(len(body)).encode())])))
            self._write(self.ws.send(RejectData(data=body, body_finished=True)))
        except ProtocolError:  # no request parsed to answer (a head too long, bytes that are no HTTP)
            self._write(f"HTTP/1.1 {status} {_REASONS.get(status, 'Bad Request')}\r\n"
                        f"content-length: 0\r\nconnection: close\r\n\r\n".encode())
        self.transport.close()

    def _upgrade_deadline(self) -> None:
        self._deadline = None
        if self.conn is None and not self.closing:
            log.warning("websocket connection from %s on listener %s did not complete its upgrade in time; "
                        "dropping it", self.peer, self.listener.name)
            self.closing = True
            self.transport.abort()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    # -- frames ---------------------------------------------------------------------------------
    def _on_binary(self, event: BytesMessage) -> None:
        if event.data:
            self.conn.data_received(bytes(event.data))

    def send_binary(self, data: bytes) -> None:
        if self.ws.state is ConnectionState.OPEN and not self.transport.is_closing():
            self._write(self.ws.send(Message(data=data)))

    def _on_close(self, event: CloseConnection) -> None:
        if self.ws.state is ConnectionState.OPEN:
            # wsproto reports a framing fault (an unmasked frame, a bad opcode, a frame over
            # FrameLimit) as a close event without the client having sent one.
            limit = self.frame_limit
            if limit.refused is not None:
                self._fail(event.code, f"frame of {limit.refused} bytes over {limit.limit} (max_frame_size "
                                       f"{self.listener.max_frame_size} plus {FRAME_SLACK})")
            else:
                self._fail(event.code, event.reason or "framing error")
            return
        self._cancel_deadline()
        if self.ws.state is ConnectionState.REMOTE_CLOSING:
            self._write(self.ws.send(event.response()))
            if self.conn is not None:
                self.conn.eof_received()
        self.closing = True
        self.transport.close()

    def _fail(self, code: int, why: str) -> None:
        """The client broke the WebSocket protocol: close frame with `code`, then the socket."""
        log.warning("websocket connection %s on listener %s closed: %s", self.peer, self.listener.name, why)
        if self.ws.state is ConnectionState.OPEN:
            self._write(self.ws.send(CloseConnection(code=code, reason=why[:120])))
        self.closing = True
        self.transport.close()

    def close(self, code: int, reason: str) -> None:
        """Our side ends the connection (the AMQP close is written): send the close frame and
        give the client a moment to answer with its own before the socket goes."""
        if self.closing:
            return
        if self.ws.state is not ConnectionState.OPEN:
            self.closing = True
            self.transport.close()
            return
        self._write(self.ws.send(CloseConnection(code=code, reason=reason)))
        self._deadline = self.server.loop.call_later(CLOSE_REPLY_WAIT_S, self._close_now)

    def _close_now(self) -> None:
        self._deadline = None
        self.closing = True
        self.transport.close()

    def _write(self, data: bytes) -> None:
        if data:
            self.transport.write(data)


def websocket_factory(server: Server, listener, adapters: dict | None = None):
    return lambda: WebSocketAcceptor(server, listener, adapters)


__all__ = ["WebSocketAcceptor", "WebSocketChannel", "websocket_factory"]
