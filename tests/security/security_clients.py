"""Clients for the security tests: a raw-socket SASL client (any mechanism, SCRAM included, and
hostile sequences), a Proton engine that speaks AMQP over a socket after our own SASL exchange,
and a frame reader that shows exactly what the broker sent."""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import proton
from proton import Message

from hermod.broker.protocol.amqptypes import Described, Symbol, ULong, decode, encode
from hermod.broker.security.scram import ScramClient

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def frame(frame_type: int, performative: int, fields: list) -> bytes:
    body = encode(Described(ULong(performative), fields))
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


def sasl_init(mech: str, response: bytes | None) -> bytes:
    return frame(1, 0x41, [Symbol(mech), response])


def sasl_response(data: bytes) -> bytes:
    return frame(1, 0x43, [data])


def connect(address: str, timeout: float = 10) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


class FrameReader:
    """Reads a protocol header, then frames, from a socket: (type, performative, fields)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _fill(self, n: int) -> bool:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def header(self) -> bytes | None:
        if not self._fill(8):
            return None
        h, self.buf = self.buf[:8], self.buf[8:]
        return h

    def frame(self):
        """The next frame, or None at end of stream."""
        if not self._fill(8):
            return None
        size, doff, ftype = struct.unpack_from(">IBB", self.buf)
        if not self._fill(size):
            return None
        body, self.buf = self.buf[doff * 4:size], self.buf[size:]
        if not body:
            return ftype, None, []
        value, _ = decode(body)
        return ftype, int(value.descriptor), value.value

    def rest(self) -> bytes:
        """Everything until the broker closes the socket."""
        out = self.buf
        self.buf = b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return out
            out += chunk


def mechanisms(reader: FrameReader) -> list[str]:
    assert reader.header() == SASL_HEADER
    ftype, code, fields = reader.frame()
    assert (ftype, code) == (1, 0x40)
    mechs = fields[0]
    return list(mechs) if isinstance(mechs, list) else [mechs]


def sasl_login(sock: socket.socket, mech: str, user: str = "", password: str = "",
               authzid: str = "") -> tuple[int, FrameReader]:
    """Run one SASL exchange on a fresh socket; returns (outcome code, reader)."""
    sock.sendall(SASL_HEADER)
    reader = FrameReader(sock)
    offered = mechanisms(reader)
    if mech.startswith("SCRAM-"):
        client = ScramClient(mech, user, password)
        sock.sendall(sasl_init(mech, client.first()))
        ftype, code, fields = reader.frame()
        if code == 0x44:
            return int(fields[0]), reader
        assert code == 0x42, code
        sock.sendall(sasl_response(client.final(fields[0])))
        ftype, code, fields = reader.frame()
        assert code == 0x44
        if int(fields[0]) == 0:
            assert client.verify(fields[1]), "the broker's server signature did not verify"
        return int(fields[0]), reader
    if mech == "PLAIN":
        response = f"{authzid}\0{user}\0{password}".encode()
    elif mech == "EXTERNAL":
        response = authzid.encode()
    else:
        response = b"trace"
    sock.sendall(sasl_init(mech, response))
    ftype, code, fields = reader.frame()
    assert code == 0x44, (code, offered)
    return int(fields[0]), reader


class EngineClient:
    """A Proton engine (no SASL layer) speaking AMQP over a socket whose SASL we did ourselves."""

    def __init__(self, sock: socket.socket, leftover: bytes = b""):
        self.sock = sock
        self.conn = proton.Connection()
        self.conn.container = "engine-client"
        self.transport = proton.Transport()
        self.transport.bind(self.conn)
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        if leftover:
            self.transport.push(leftover)

    def pump(self, until, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            out = self.transport.pending()
            if out > 0:
                self.sock.sendall(self.transport.peek(out))
                self.transport.pop(out)
            if until():
                return
            if time.monotonic() > deadline:
                raise AssertionError("engine client timed out")
            self.sock.settimeout(max(0.01, min(0.2, deadline - time.monotonic())))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                self.transport.close_tail()
                return
            self.transport.push(data)

    def send(self, address: str, body):
        self._links = getattr(self, "_links", 0) + 1
        link = self.session.sender(f"s{self._links}-{address}")
        link.target.address = address
        link.open()
        self.pump(lambda: link.state & proton.Endpoint.REMOTE_ACTIVE and link.credit > 0
                  or link.state & proton.Endpoint.REMOTE_CLOSED)
        if link.state & proton.Endpoint.REMOTE_CLOSED:
            return link.remote_condition
        msg = body if isinstance(body, Message) else Message(body=body)
        d = link.delivery(b"1")
        link.send(msg.encode())
        link.advance()
        self.pump(lambda: d.remote_state)
        self.last_condition = d.remote.condition
        return d.remote_state


def hermod(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def engine_login(address: str, user: str, password: str, mech: str = "PLAIN") -> EngineClient:
    sock = connect(address)
    code, reader = sasl_login(sock, mech, user, password)
    assert code == 0, f"login of {user} failed"
    return EngineClient(sock, reader.buf)


def relay_send(client: EngineClient, to: str, body: str):
    """Send on an anonymous-relay link (no target address); (outcome, condition name, text)."""
    link = getattr(client, "_relay", None)
    if link is None:
        link = client._relay = client.session.sender("relay")
        link.target.address = None
        link.open()
        client.pump(lambda: link.state & proton.Endpoint.REMOTE_ACTIVE and link.credit > 0)
    client._tag = getattr(client, "_tag", 0) + 1
    d = link.delivery(str(client._tag).encode())
    link.send(Message(body=body, address=to).encode())
    link.advance()
    client.pump(lambda: d.remote_state)
    cond = d.remote.condition
    return d.remote_state, cond.name if cond else None, cond.description if cond else None
