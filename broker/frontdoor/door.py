"""The front door: the first protocol object of every TCP connection on every listener (inside
TLS on a TLS listener). It counts the socket toward `max_connections` from accept (admission.py),
reads until `detect` knows the protocol, then hands the socket, with the bytes read so far and
its place in the count, to that protocol's adapter.

Bytes that match no enabled protocol close the connection with one log line naming the listener
and the first bytes in hex; an HTTP request on a protocol port gets a short `400` saying what the
port speaks, at once; a connection that has not sent enough bytes to tell within
`detect_timeout_ms` is closed. A listener with one protocol skips the wait: the adapter gets the
socket at accept (its own first bytes' check refuses anything else).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping

from .admission import Admission, hand_over, peer_of
from .detect import HTTP, MAX_LOOK, MORE, TLS, detect

log = logging.getLogger("hermod.server")

Adapter = Callable[[], asyncio.Protocol]  # makes the protocol object of one connection


def _http_refusal(protocols: tuple[str, ...]) -> bytes:
    text = (f"This port speaks {', '.join(protocols)}, not HTTP: the management API and console "
            "are on the [http] port.\n").encode()
    return (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(text)).encode() + b"\r\n\r\n" + text)


class FrontDoor(asyncio.Protocol):
    """One connection, until its protocol is known."""

    def __init__(self, server, listener_name: str, protocols: tuple[str, ...], adapters: Mapping[str, Adapter],
                 timeout_s: float):
        self.server = server
        self.listener_name = listener_name
        self.protocols = protocols
        self.adapters = adapters
        self.timeout_s = timeout_s
        self.admission: Admission | None = None  # handed over by TLS, else taken at accept
        self.transport: asyncio.BaseTransport | None = None
        self.buffer = bytearray()
        self.timer: asyncio.TimerHandle | None = None
        self.peer = "?"

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = peer_of(transport)
        if self.admission is None:  # accepted here: a plain listener
            self.admission = self.server.admissions.admit(self.peer)
            if self.admission is None:  # far past max_connections: closed at accept
                transport.abort()
                return
        if len(self.protocols) == 1:
            self._hand_over(self.protocols[0])
            return
        self.timer = self.server.loop.call_later(self.timeout_s, self._too_slow)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        verdict = detect(bytes(self.buffer[:MAX_LOOK]), self.protocols)
        if verdict is MORE:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if verdict in self.adapters:
            self._hand_over(verdict)
        elif verdict == HTTP:
            log.warning("listener %s: an HTTP request from %s; answered 400 and closed (this port speaks %s)",
                        self.listener_name, self.peer, ", ".join(self.protocols))
            self._close(_http_refusal(self.protocols))
        else:
            what = "a TLS handshake on a plain port" if verdict == TLS else (
                f"{verdict} is not served yet" if verdict in self.protocols else "no protocol this listener speaks")
            log.warning("listener %s: connection from %s closed: %s (first bytes %s)", self.listener_name,
                        self.peer, what, bytes(self.buffer[:16]).hex())
            self._close()

    def eof_received(self) -> bool:
        self._close()
        return False

    def connection_lost(self, exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.admission is not None:
            self.admission.release()
            self.admission = None

    # -------------------------------------------------------------------------------------------
    def _hand_over(self, protocol: str) -> None:
        transport = self.transport
        assert transport is not None
        adapter = self.adapters.get(protocol)
        if adapter is None:
            log.warning("listener %s: %s from %s is not served yet; closing", self.listener_name, protocol, self.peer)
            self._close()
            return
        inner = adapter()
        admission, self.admission = self.admission, None
        transport.set_protocol(inner)
        hand_over(inner, transport, admission)
        if self.buffer and not transport.is_closing():
            data, self.buffer = bytes(self.buffer), bytearray()
            inner.data_received(data)

    def _too_slow(self) -> None:
        self.timer = None
        log.warning("listener %s: connection from %s closed: not enough bytes to tell its protocol within %.1f s "
                    "(first bytes %s)", self.listener_name, self.peer, self.timeout_s, bytes(self.buffer[:16]).hex())
        self._close()

    def _close(self, last: bytes = b"") -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if last:
            transport.write(last)  # type: ignore[attr-defined]
        transport.close()
