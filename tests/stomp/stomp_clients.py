"""Clients for the STOMP adapter tests: stomp.py (PyPI, a real client library) and a raw socket
client that reads the broker's frames with the codec's parser (for byte-exact and hostile cases)."""
from __future__ import annotations

import socket
import threading
import time

import stomp  # stomp.py, in the `test` extra

from hermod.broker.stomp import HEARTBEAT, SERVER_COMMANDS, FrameParser, Limits
from hermod.broker.stomp.encoder import escape


def host_port(broker) -> tuple[str, int]:
    host, port = broker.address.rsplit(":", 1)
    return host, int(port)


class Collector(stomp.ConnectionListener):
    """Keeps every MESSAGE, ERROR and RECEIPT stomp.py hands to its listener."""

    def __init__(self) -> None:
        self.messages: list = []
        self.errors: list = []
        self.receipts: list[str] = []
        self.disconnected = threading.Event()
        self.cond = threading.Condition()

    def on_message(self, frame) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_error(self, frame) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame) -> None:
        with self.cond:
            self.receipts.append(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        self.disconnected.set()

    def wait(self, predicate, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out: {len(self.messages)} messages, errors {self.errors}")
                self.cond.wait(left)

    def wait_messages(self, n: int, timeout: float = 10.0) -> list:
        self.wait(lambda: len(self.messages) >= n, timeout)
        return self.messages


CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


def connect(broker, version: str = "1.2", login: str | None = None, passcode: str | None = None,
            heartbeats=(0, 0), headers: dict | None = None, wait: bool = True):
    """A connected stomp.py connection and its Collector."""
    kwargs = {} if version == "1.0" else {"heartbeats": heartbeats}
    conn = CONNECTIONS[version]([host_port(broker)], **kwargs)
    listener = Collector()
    conn.set_listener("c", listener)
    conn.connect(login, passcode, wait=wait, headers=headers or {})
    return conn, listener


class Raw:
    """A STOMP client on a plain socket: writes what it is told, reads the broker's frames."""

    def __init__(self, broker, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(host_port(broker), timeout=timeout)
        self.parser = FrameParser(Limits(max_frame_size=1 << 26), commands=SERVER_COMMANDS)
        self.frames: list = []
        self.beats = 0
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, command: str, headers=(), body: bytes = b"", version: str = "1.2", length: bool = True) -> None:
        self.send(client_frame(command, headers, body, version, length))

    def connect(self, version: str = "1.2", login: str | None = None, passcode: str | None = None,
                extra=()) -> object:
        headers = [("accept-version", version), ("host", "/")]
        if login is not None:
            headers += [("login", login), ("passcode", passcode or "")]
        self.send(_client_frame("CONNECT", headers + list(extra)))
        self.parser.version = None
        frame = self.next()
        if frame.command == "CONNECTED":
            self.parser.version = frame.header("version")
        return frame

    def _read(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.eof = True
            return False
        for item in self.parser.feed(data):
            if item is HEARTBEAT:
                self.beats += 1
            else:
                self.frames.append(item)
        return True

    def next(self, timeout: float = 10.0):
        """The next frame (AssertionError at EOF or after `timeout`)."""
        deadline = time.monotonic() + timeout
        while not self.frames:
            if self.eof:
                raise AssertionError("the broker closed the connection")
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self._read()
            except socket.timeout:
                raise AssertionError("no frame in time") from None
        return self.frames.pop(0)

    def until(self, command: str, timeout: float = 10.0):
        while True:
            frame = self.next(timeout)
            if frame.command == command:
                return frame

    def closed_by_broker(self, timeout: float = 10.0) -> bool:
        """Read (discarding frames) until EOF; True if the broker closed in time."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self._read()
            except socket.timeout:
                return False
            except OSError:
                return True
        return True

    def close(self) -> None:
        self.sock.close()


def _client_frame(command: str, headers, body: bytes = b"") -> bytes:
    lines = [command] + [f"{k}:{v}" for k, v in headers]
    if body:
        lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"


def client_frame(command: str, headers=(), body: bytes = b"", version: str = "1.2", length: bool = True) -> bytes:
    """A client frame, escaped per `version` (CONNECT never is), `content-length` when asked."""
    lines = [command]
    for k, v in headers:
        lines.append(f"{escape(k, version)}:{escape(v, version)}" if version != "1.0" else f"{k}:{v}")
    if length and body:
        lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"
