"""A hostile AMQP client written frame by frame over a raw socket.

Proton's engine will not send past its credit or session window, so a client that ignores
them has to be spoken by hand: performatives are encoded with `proton.Data` (described lists,
explicitly typed fields) and framed here; frames from the broker are decoded the same way.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from proton import Data, Described, symbol, uint, ulong

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
TARGET, SOURCE = 0x29, 0x28
NAMES = {OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer",
         DISPOSITION: "disposition", DETACH: "detach", END: "end", CLOSE: "close"}


@dataclass
class Frame:
    channel: int
    code: int | None  # None: an empty (heartbeat) frame
    fields: list
    payload: bytes = b""

    @property
    def name(self) -> str:
        return NAMES.get(self.code, "empty" if self.code is None else hex(self.code))

    def error(self, index: int) -> str | None:
        """The condition name of the error field at `index` (detach 2, end 0, close 0)."""
        err = self.fields[index] if len(self.fields) > index else None
        if isinstance(err, Described) and err.value:
            return str(err.value[0])
        return None


def _value(d: Data):
    """The current value of `d`, with binary values as bytes: Proton hands them out as
    memoryviews into the decoder's buffer, which neither outlive it nor hash (a map keyed by
    delivery tags: an attach's unsettled map)."""
    kind = d.type()
    if kind == Data.BINARY:
        return bytes(d.get_binary())
    if kind in (Data.MAP, Data.LIST, Data.DESCRIBED):
        d.enter()
        items = []
        while d.next():
            items.append(_value(d))
        d.exit()
        if kind == Data.MAP:
            return dict(zip(items[0::2], items[1::2]))
        if kind == Data.DESCRIBED:
            return Described(items[0], items[1] if len(items) > 1 else None)
        return items
    return d.get_object()


def encode(code: int, fields: list) -> bytes:
    d = Data()
    d.put_object(Described(ulong(code), fields))
    return d.encode()


def frame(channel: int, body: bytes, frame_type: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, channel) + body


def message(body: bytes) -> bytes:
    """A bare message: one data section."""
    d = Data()
    d.put_object(Described(ulong(0x75), body))
    return d.encode()


class FrameClient:
    """One raw connection. `handshake()` does SASL ANONYMOUS and the open; then frames are
    sent with `send` and read with `read` / `expect`."""

    def __init__(self, address: str, timeout: float = 10):
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.timeout = timeout
        self._buf = b""
        self.received: list[tuple[float, Frame]] = []  # (monotonic time, frame) of every frame read

    def close(self) -> None:
        self.sock.close()

    # -- bytes -------------------------------------------------------------------------------
    def _read_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the socket")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def read(self, timeout: float | None = None) -> Frame:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        size, doff, _type, channel = struct.unpack(">IBBH", self._read_exact(8, deadline))
        rest = self._read_exact(size - 8, deadline)[doff * 4 - 8:]
        if not rest:
            f = Frame(channel, None, [])
        else:
            d = Data()
            used = d.decode(rest)
            d.rewind()
            d.next()
            value = _value(d)
            f = Frame(channel, int(value.descriptor), list(value.value or []), rest[used:])
        self.received.append((time.monotonic(), f))
        return f

    def expect(self, code: int, timeout: float | None = None) -> Frame:
        """Read until a frame with `code` (skipping flows, dispositions and empty frames)."""
        while True:
            f = self.read(timeout)
            if f.code == code:
                return f
            if f.code in (CLOSE, END, DETACH) and code not in (CLOSE, END, DETACH):
                raise AssertionError(f"expected {NAMES.get(code)}, got {f.name} {f.fields}")

    def send(self, channel: int, code: int, fields: list, payload: bytes = b"") -> None:
        self.sock.sendall(frame(channel, encode(code, fields) + payload))

    # -- the usual steps -----------------------------------------------------------------------
    def handshake(self, container: str = "raw", idle_timeout_ms: int | None = None,
                  max_frame_size: int | None = None, user: str | None = None,
                  password: str = "") -> Frame:
        """SASL (ANONYMOUS, or PLAIN as `user`), the AMQP header and the open."""
        self.sock.sendall(SASL_HEADER)
        init = [symbol("ANONYMOUS"), b""] if user is None else [symbol("PLAIN"), f"\0{user}\0{password}".encode()]
        self.sock.sendall(frame(0, encode(SASL_INIT, init), frame_type=1))
        assert self._read_exact(8, time.monotonic() + self.timeout) == SASL_HEADER
        while (outcome := self.read()).code != SASL_OUTCOME:
            pass
        assert int(outcome.fields[0]) == 0, f"login refused: {outcome.fields}"
        self.sock.sendall(AMQP_HEADER)
        assert self._read_exact(8, time.monotonic() + self.timeout) == AMQP_HEADER
        fields = [container, None, None if max_frame_size is None else uint(max_frame_size), None]
        if idle_timeout_ms is not None:
            fields.append(uint(idle_timeout_ms))
        self.send(0, OPEN, fields)
        return self.expect(OPEN)

    def begin(self, channel: int, incoming_window: int = 2 ** 31 - 1) -> Frame:
        self.send(channel, BEGIN, [None, uint(0), uint(incoming_window), uint(2 ** 31 - 1)])
        return self.expect(BEGIN)

    def attach_sender(self, channel: int, handle: int, address: str, name: str | None = None,
                      wait: bool = True) -> Frame | None:
        """Attach a link we send on (role sender) to `address`; the broker's attach back."""
        target = Described(ulong(TARGET), [address])
        source = Described(ulong(SOURCE), [None])
        self.send(channel, ATTACH, [name or f"s{handle}", uint(handle), False, None, None, source, target,
                                    None, None, uint(0)])
        return self.expect(ATTACH) if wait else None

    def attach_receiver(self, channel: int, handle: int, address: str, wait: bool = True) -> Frame | None:
        source = Described(ulong(SOURCE), [address])
        target = Described(ulong(TARGET), [None])
        self.send(channel, ATTACH, [f"r{handle}", uint(handle), True, None, None, source, target])
        return self.expect(ATTACH) if wait else None

    def transfer(self, channel: int, handle: int, delivery_id: int, body: bytes, settled: bool = False,
                 more: bool = False) -> None:
        self.send(channel, TRANSFER, [uint(handle), uint(delivery_id), struct.pack(">I", delivery_id),
                                      uint(0), settled, more], message(body))

    def transfers(self, channel: int, handle: int, first_id: int, bodies: list[bytes]) -> None:
        """Many transfers in one write (a client that does not wait for credit)."""
        self.sock.sendall(b"".join(
            frame(channel, encode(TRANSFER, [uint(handle), uint(first_id + i), struct.pack(">I", first_id + i),
                                             uint(0), False, False]) + message(body))
            for i, body in enumerate(bodies)))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def link_credit_limit(flow) -> int | None:
    """delivery-count + link-credit of a link flow frame: how many transfers it allows in all."""
    f = flow.fields
    if len(f) > 6 and f[4] is not None and f[6] is not None:
        return int(f[5] or 0) + int(f[6])
    return None


def settled_count(disposition) -> int:
    """How many deliveries a disposition frame covers (first .. last)."""
    first, last = disposition.fields[1], disposition.fields[2]
    return int(last if last is not None else first) - int(first) + 1


def open_sender(client: FrameClient, address: str, channel: int = 0, handle: int = 0) -> int:
    """Attach a sending link; the credit the broker grants with it."""
    reply = client.attach_sender(channel, handle, address)
    assert reply.fields[6] is not None, "attach refused"
    while True:
        f = client.read()
        if f.code == FLOW and link_credit_limit(f) is not None:
            return link_credit_limit(f)
        assert f.code != DETACH, f.fields


def assert_serving(url: str, address: str) -> None:
    """A polite client still gets a message through the broker (a round trip on `address`)."""
    from wire_helpers import connect, receive_bodies, send
    conn = connect(url)
    send(conn, address, ["served"])
    assert receive_bodies(conn.create_receiver(address), 1) == ["served"]
    conn.close()
