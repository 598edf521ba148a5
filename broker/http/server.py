"""A small HTTP/1.1 server on asyncio streams, bounded against hostile clients.

Why not a library: h11 and aiohttp are not installed, the API is a dozen JSON routes, and the
limits that matter here (a head that must arrive whole within a deadline, a body size cap,
a connection cap) are a few lines on asyncio's StreamReader. Requests on one connection are
served one after another (keep-alive; no pipelining beyond reading the next request after
answering). Bodies need Content-Length (no chunked uploads).
"""
from __future__ import annotations

import asyncio
import re
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("hermod.http")

MAX_HEAD = 16 * 1024  # request line + headers
MAX_HEADERS = 100
MAX_BODY = 1024 * 1024
# The whole head must arrive within this (slowloris): `HttpConfig.head_timeout_s`, which tests
# shorten through HERMOD_HTTP_HEAD_TIMEOUT_S (read by config.py).
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 30.0  # a keep-alive connection waiting for its next request
MAX_CONNECTIONS = 256
# Over MAX_CONNECTIONS with none idle: this many more, for the paths that must always answer.
RESERVE_CONNECTIONS = 32
RESERVE_PATHS = frozenset({"/health", "/metrics"})
MAX_PER_ADDRESS = 64  # more from one address may go to admit another address (a browser uses 6)
EVICT_FIRST_HEAD_S = 1.0  # a new connection silent this long may go to make room
MAX_REQUESTS_PER_CONNECTION = 1000

REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           409: "Conflict", 411: "Length Required", 413: "Payload Too Large", 414: "URI Too Long",
           421: "Misdirected Request",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable"}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    remote: str | None = None  # "host:port" of the client (the audit log's `peer`)
    local: str | None = None  # the address the request arrived on (http/origin.py's Host rule)
    peer: str = "?"  # the client's address (login throttling counts failures per address)


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, value) -> Response:
        return cls(status, b"" if status == 204 else json.dumps(value).encode())

    @classmethod
    def error(cls, status: int, message: str) -> Response:
        return cls.json(status, {"error": message})


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


Handler = Callable[[Request], Awaitable[Response]]


class _Slot:
    """One accepted connection: whether it waits for a request head (and since when), so that a
    full listener can close the one that costs least to lose."""
    __slots__ = ("writer", "task", "peer", "waiting_since", "served", "reserve")

    def __init__(self, writer: asyncio.StreamWriter, task, peer: str, reserve: bool):
        self.writer = writer
        self.task = task
        self.peer = peer
        self.waiting_since: float | None = time.monotonic()  # None: a request is being served
        self.served = 0
        self.reserve = reserve  # accepted over MAX_CONNECTIONS: /health and /metrics only


class HttpServer:
    """At most MAX_CONNECTIONS ordinary connections. When a new one comes and they are all taken,
    an idle keep-alive connection (the longest idle first) is closed to make room, else one that
    has waited at least EVICT_FIRST_HEAD_S for its first request head, else the newest of an
    address holding more than MAX_PER_ADDRESS if that is not the newcomer's; failing all, the
    newcomer takes one of RESERVE_CONNECTIONS slots that answer `/health` and `/metrics` (and 503
    to the rest), one request each. Beyond those, 503 and close."""

    def __init__(self, handler: Handler, head_timeout_s: float = HEAD_TIMEOUT_S):
        self.handler = handler
        self.head_timeout_s = head_timeout_s
        self._server: asyncio.base_events.Server | None = None
        self._slots: dict[asyncio.Task, _Slot] = {}
        self.max_connections = MAX_CONNECTIONS

    async def start(self, host: str, port: int, ssl=None) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEAD,
                                                  reuse_address=True, ssl=ssl)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._slots)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _admit(self, writer: asyncio.StreamWriter, task, peer: str) -> _Slot | None:
        """A slot for a new connection from `peer`, or None (answer 503)."""
        ordinary = [s for s in self._slots.values() if not s.reserve]
        if len(ordinary) >= self.max_connections:
            victim = self._idlest(ordinary) or self._hogging(ordinary, peer)
            if victim is not None:
                log.info("HTTP listener full: closing a connection from %s to admit one from %s",
                         victim.peer, peer)
                del self._slots[victim.task]
                if victim.waiting_since is None:
                    victim.task.cancel()  # mid-request (e.g. a login waiting its turn): dropped
                victim.writer.close()
            elif len(self._slots) - len(ordinary) >= RESERVE_CONNECTIONS:
                return None
            else:
                slot = self._slots[task] = _Slot(writer, task, peer, reserve=True)
                return slot
        slot = self._slots[task] = _Slot(writer, task, peer, reserve=False)
        return slot

    @staticmethod
    def _hogging(slots: list[_Slot], peer: str) -> _Slot | None:
        """With none idle: the newest connection of another address holding more than
        MAX_PER_ADDRESS (a password guesser's requests wait their turns in the login throttle,
        busy, for seconds each), so that one client cannot keep everybody else out."""
        counts = Counter(s.peer for s in slots)
        hog, held = counts.most_common(1)[0]
        if hog == peer or held <= MAX_PER_ADDRESS:
            return None
        return next(s for s in reversed(slots) if s.peer == hog)

    @staticmethod
    def _idlest(slots: list[_Slot]) -> _Slot | None:
        now = time.monotonic()
        keep_alive = [s for s in slots if s.waiting_since is not None and s.served]
        if keep_alive:
            return min(keep_alive, key=lambda s: s.waiting_since or 0.0)
        fresh = [s for s in slots if s.waiting_since is not None and now - s.waiting_since >= EVICT_FIRST_HEAD_S]
        return min(fresh, key=lambda s: s.waiting_since or 0.0) if fresh else None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        sockname = writer.get_extra_info("sockname")
        peername = writer.get_extra_info("peername")
        local = sockname[0] if isinstance(sockname, tuple) else None
        peer = peername[0] if isinstance(peername, tuple) else "?"
        slot = self._admit(writer, task, peer)
        if slot is None:
            await _write(writer, Response.error(503, "too many HTTP connections"), close=True)
            writer.close()
            return
        try:
            for served in range(MAX_REQUESTS_PER_CONNECTION):
                slot.waiting_since = time.monotonic()
                try:
                    request = await read_request(reader, served == 0, self.head_timeout_s)
                except HttpError as e:
                    await _write(writer, Response.error(e.status, str(e)), close=True)
                    await _linger(reader, writer)
                    break
                if request is None or task not in self._slots:  # closed, idled out, or evicted
                    break
                slot.waiting_since = None
                request.local, request.peer = local, peer
                request.remote = _peer(writer)
                keep = request.headers.get("connection", "").lower() != "close" and not slot.reserve
                if slot.reserve and request.path not in RESERVE_PATHS:
                    response = Response.error(503, "too many HTTP connections")
                else:
                    try:
                        response = await self.handler(request)
                    except Exception:  # noqa: BLE001 - one request's bug must not take the listener down
                        log.exception("HTTP %s %s failed", request.method, request.path)
                        response = Response.error(500, "internal error")
                await _write(writer, response, close=not keep, head_only=request.method == "HEAD")
                slot.served += 1
                if not keep:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._slots.pop(task, None)
            writer.close()


# A request starts with its method (at most 7 letters: OPTIONS) and a space; an AMQP, MQTT, STOMP
# or OpenWire client's first 8 bytes never do.
_REQUEST_START = re.compile(rb"[A-Z]{1,7} ")
NOT_HTTP = ("not an HTTP request: this is Hermod's HTTP port (management API, console, metrics); "
            "AMQP, OpenWire, STOMP and MQTT clients connect to the broker's protocol listeners")


async def read_request(reader: asyncio.StreamReader, first: bool,
                       head_timeout_s: float = HEAD_TIMEOUT_S) -> Request | None:
    """The next request, or None when the client closed (or idled out) between requests."""
    start = b""
    if first:  # another protocol's client on this port is told so at once, not after the head timeout
        try:
            start = await asyncio.wait_for(reader.readexactly(len_start := 8), head_timeout_s)
        except asyncio.IncompleteReadError as e:
            if not e.partial.strip():
                return None
            start = e.partial
        except asyncio.TimeoutError:
            raise HttpError(408, "request head not received in time") from None
        if not _REQUEST_START.match(start):
            raise HttpError(400, NOT_HTTP)
        if len(start) < len_start:
            raise HttpError(400, "incomplete request")
    try:
        head = start + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              head_timeout_s if first else IDLE_TIMEOUT_S)
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise HttpError(400, "incomplete request") from None
    except asyncio.LimitOverrunError:
        raise HttpError(431, f"request head over {MAX_HEAD} bytes") from None
    except asyncio.TimeoutError:
        if first:
            raise HttpError(408, "request head not received in time") from None
        return None
    except ValueError:  # the StreamReader's limit hit with no separator in the buffer
        raise HttpError(431, f"request head over {MAX_HEAD} bytes") from None
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise HttpError(400, "bad request head") from None
    lines = text[:-4].split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, "bad request line")
    method, target, _version = parts
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, "bad header line")
        headers[name.lower()] = value.strip()
    if "transfer-encoding" in headers:
        raise HttpError(501, "chunked request bodies are not supported; send Content-Length")
    body = b""
    length_text = headers.get("content-length")
    if length_text is not None:
        if not length_text.isdigit():
            raise HttpError(400, "bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY:
            raise HttpError(413, f"request body over {MAX_BODY} bytes")
        try:
            body = await asyncio.wait_for(reader.readexactly(length), BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise HttpError(408, "request body not received in time") from None
        except asyncio.IncompleteReadError:
            raise HttpError(400, "request body shorter than Content-Length") from None
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    return Request(method.upper(), url.path, query, headers, body)


def _peer(writer: asyncio.StreamWriter) -> str | None:
    """The client as the AMQP side writes a connection's peer: "host:port"."""
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else None


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After an error answer, read (and drop) what the client is still sending for a moment, so
    that closing does not reset the connection before it reads the answer. Bounded in bytes and
    time."""
    try:
        writer.write_eof()
        left = 4 * MAX_BODY
        async with asyncio.timeout(2.0):
            while left > 0:
                chunk = await reader.read(65536)
                if not chunk:
                    return
                left -= len(chunk)
    except (OSError, TimeoutError, asyncio.TimeoutError, RuntimeError):
        return


async def _write(writer: asyncio.StreamWriter, response: Response, close: bool, head_only: bool = False) -> None:
    head = [f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Unknown')}"]
    if response.status != 204:
        head.append(f"Content-Type: {response.content_type}")
        head.append(f"Content-Length: {len(response.body)}")
    head.extend(f"{k}: {v}" for k, v in response.headers.items())
    if close:
        head.append("Connection: close")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    if response.body and not head_only and response.status != 204:
        writer.write(response.body)
    await writer.drain()
