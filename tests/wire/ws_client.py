"""A blocking WebSocket client socket (wsproto, client side) for the wire tests.

`WsSocket` upgrades a TCP (or TLS) socket with the subprotocol `amqp` and then looks like the
socket it wraps: `sendall` sends one binary message, `recv` returns binary payload bytes as they
arrive (pings answered on the way). So the raw AMQP/SASL helpers of the security tests and a
Proton engine run over WebSocket unchanged. `raw` is the socket underneath, for hostile bytes.
"""
from __future__ import annotations

import os
import socket
import ssl

from wsproto import ConnectionType, WSConnection
from wsproto.utilities import LocalProtocolError
from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Message, Ping, RejectConnection,
                            RejectData, Request, TextMessage)


MESSAGE_CHUNK = 16 * 1024


class WsRefused(Exception):
    def __init__(self, status: int, body: bytes):
        super().__init__(f"upgrade refused: {status} {body!r}")
        self.status = status
        self.body = body


class WsSocket:
    def __init__(self, raw: socket.socket, host: str = "localhost", path: str = "/",
                 subprotocols=("amqp",), timeout: float = 10, headers: dict | None = None):
        self.raw = raw
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending = bytearray()  # binary payload received, not yet returned by recv
        self.closed_by_peer: CloseConnection | None = None
        self.timeout = timeout
        raw.settimeout(timeout)
        extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]  # e.g. a browser's Origin
        raw.sendall(self.ws.send(Request(host=host, target=path, subprotocols=list(subprotocols),
                                         extra_headers=extra)))
        status, body = None, b""
        while status is None:
            data = raw.recv(65536)
            if not data:
                raise ConnectionError("closed during the upgrade")
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, AcceptConnection):
                    self.subprotocol = event.subprotocol
                    status = 101
                elif isinstance(event, RejectConnection):
                    status = event.status_code
                    if not event.has_body:
                        raise WsRefused(status, b"")
                elif isinstance(event, RejectData):
                    body += event.data
                    if event.body_finished:
                        raise WsRefused(status, body)
                else:
                    self._on_event(event)
        if status != 101:  # a refusal whose body is still coming
            while data := raw.recv(65536):
                self.ws.receive_data(data)
                for event in self.ws.events():
                    if isinstance(event, RejectData):
                        body += event.data
            raise WsRefused(status, body)

    @classmethod
    def connect(cls, address: str, path: str = "/", subprotocols=("amqp",), tls: ssl.SSLContext | None = None,
                timeout: float = 10, headers: dict | None = None) -> WsSocket:
        host, port = address.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        if tls is not None:
            raw = tls.wrap_socket(raw, server_hostname=host)
        return cls(raw, host, path, subprotocols, timeout, headers)

    def _on_event(self, event) -> None:
        if isinstance(event, BytesMessage):
            self.pending += event.data
        elif isinstance(event, Ping):
            self.raw.sendall(self.ws.send(event.response()))
        elif isinstance(event, CloseConnection):
            self.closed_by_peer = event
            try:
                self.raw.sendall(self.ws.send(event.response()))
            except (OSError, LocalProtocolError):  # the peer may have gone already; the close is recorded
                pass
        elif isinstance(event, TextMessage):
            raise AssertionError(f"the broker sent a text frame: {event.data!r}")

    # -- the socket face ---------------------------------------------------------------------
    def settimeout(self, t) -> None:
        self.raw.settimeout(t)

    def sendall(self, data: bytes) -> None:
        """One binary message per MESSAGE_CHUNK bytes: a Proton engine hands over all its
        pending output at once, which on a 512-byte listener would be a frame far over its bound."""
        data = bytes(data)
        for at in range(0, len(data), MESSAGE_CHUNK):
            self.raw.sendall(self.ws.send(Message(data=data[at:at + MESSAGE_CHUNK])))

    def recv(self, n: int) -> bytes:
        while not self.pending:
            if self.closed_by_peer is not None:
                return b""
            data = self.raw.recv(65536)
            if not data:
                return b""
            self.ws.receive_data(data)
            for event in self.ws.events():
                self._on_event(event)
        out = bytes(self.pending[:n])
        del self.pending[:n]
        return out

    def close(self) -> None:
        try:
            if self.closed_by_peer is None:
                self.raw.sendall(self.ws.send(CloseConnection(code=1000)))
        except (OSError, LocalProtocolError):  # the peer went first: closing anyway
            pass
        self.raw.close()


BINARY, TEXT, CONTINUATION, CLOSE, PING = 0x2, 0x1, 0x0, 0x8, 0x9


def ws_frame(opcode: int, payload: bytes, masked: bool = True, fin: bool = True, length: int | None = None) -> bytes:
    """One WebSocket frame built by hand, for what a well-behaved library never sends (an
    unmasked client frame, a header announcing `length` bytes with fewer behind it)."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | opcode])
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 65536:
        head += bytes([mask_bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([mask_bit | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_close(raw: socket.socket, timeout: float = 10, already: bytes = b"") -> tuple[int | None, bytes]:
    """Read a server's frames until its close frame: (close code, binary payload before it).
    (None, ...) when the socket ended without one. `already`: frame bytes read before."""
    raw.settimeout(timeout)
    buf, data = already, b""
    while True:
        while len(buf) >= 2:
            opcode, n, at = buf[0] & 0x0F, buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, at = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, at = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < at + n:
                break
            payload, buf = buf[at:at + n], buf[at + n:]
            if opcode == CLOSE:
                return (int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005), data
            data += payload
        chunk = raw.recv(65536)
        if not chunk:
            return None, data
        buf += chunk
