"""A raw AMQP 1.0 client for hostile tests: frames are built by hand (performatives encoded with
proton.Data, everything else with struct), written to a plain socket, and the broker's frames
are read back and decoded. Nothing here is polite on the client's behalf: it sends exactly the
bytes a test asks for, credit or no credit, valid or not.

Performative fields are positional lists in the order of the AMQP 1.0 spec (section 2.7); the
helpers below fill in the mandatory ones with sane values so that tests only spell out what
they twist.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Self

from proton import Data, Described, symbol, ubyte, uint, ulong, ushort

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"

CODES = {"open": 0x10, "begin": 0x11, "attach": 0x12, "flow": 0x13, "transfer": 0x14,
         "disposition": 0x15, "detach": 0x16, "end": 0x17, "close": 0x18,
         "sasl-mechanisms": 0x40, "sasl-init": 0x41, "sasl-outcome": 0x44}
NAMES = {code: name for name, code in CODES.items()}
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D
ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x24, 0x25, 0x26, 0x27
OUTCOMES = {ACCEPTED: "accepted", REJECTED: "rejected", RELEASED: "released", MODIFIED: "modified"}
SENDER, RECEIVER = False, True


def encode(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def described(code: int, fields: list) -> Described:
    return Described(ulong(code), list(fields))


def frame(body: bytes, channel: int = 0, frame_type: int = 0) -> bytes:
    """One frame: size, doff = 2 (no extended header), type (0 AMQP, 1 SASL), channel, body."""
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, channel) + body


def performative(name: str, fields: list, channel: int = 0, payload: bytes = b"") -> bytes:
    return frame(encode(described(CODES[name], fields)) + payload, channel)


# -- mandatory fields filled in ------------------------------------------------------------------


def open_fields(container_id: str = "hostile", max_frame: int = 1 << 20, channel_max: int = 65535,
                idle_ms: int | None = None) -> list:
    return [container_id, "localhost", uint(max_frame), ushort(channel_max),
            None if idle_ms is None else uint(idle_ms)]


def begin_fields(window: int = 1 << 31, handle_max: int = 0xFFFFFFFF) -> list:
    return [None, uint(0), uint(window), uint(window), uint(handle_max)]


def source(address: str | None, **extra: Any) -> Described:
    fields: list = [address, None, None, None, None, None, None, None, None, None, None]
    if "filter" in extra:
        fields[7] = extra["filter"]
    if "capabilities" in extra:
        fields[10] = extra["capabilities"]
    while fields and fields[-1] is None:
        fields.pop()
    return described(SOURCE, fields)


def target(address: str | None) -> Described:
    return described(TARGET, [address])


def attach_fields(name: str, handle: int, role: bool, address: str | None, *,
                  src: Described | None = None, settled: bool = False) -> list:
    """An attach: a sender (role False) sends to `address`, a receiver takes from it."""
    if role == SENDER:
        return [name, uint(handle), SENDER, ubyte(1 if settled else 0), ubyte(0),
                source(name), target(address), None, None, uint(0)]
    return [name, uint(handle), RECEIVER, ubyte(0), ubyte(0), src or source(address), target(None)]


def flow_fields(handle: int, credit: int, delivery_count: int = 0, window: int = 1 << 31) -> list:
    return [uint(0), uint(window), uint(0), uint(window), uint(handle), uint(delivery_count),
            uint(credit)]


def transfer(handle: int, delivery_id: int, message: bytes, channel: int = 0,
             settled: bool = False, more: bool = False, tag: bytes | None = None) -> bytes:
    tag = tag if tag is not None else delivery_id.to_bytes(8, "big")
    return performative("transfer", [uint(handle), uint(delivery_id), tag, uint(0), settled, more],
                        channel, payload=message)


def disposition(first: int, last: int | None = None, outcome: int = ACCEPTED, settled: bool = True,
                role: bool = RECEIVER, channel: int = 0) -> bytes:
    return performative("disposition", [role, uint(first), uint(first if last is None else last),
                                        settled, described(outcome, [])], channel)


# -- messages -------------------------------------------------------------------------------------


def message_bytes(body: Any, properties: dict | None = None, durable: bool = False) -> bytes:
    """A bare message: optional header (durable), application-properties, an amqp-value body."""
    out = b""
    if durable:
        out += encode(described(0x70, [True]))
    if properties:
        out += encode(Described(ulong(0x74), properties))
    out += encode(Described(ulong(0x77), body))
    return out


# -- decode bombs: well-framed sections whose contents claim far more than they hold ---------------

# An array32 that claims 4,294,967,295 elements of the zero-width type null.
ARRAY_BOMB = b"\xf0" + struct.pack(">II", 5, 0xFFFFFFFF) + b"\x40"


def nested_lists(depth: int) -> bytes:
    """`depth` list32s, each holding the next: 9 bytes a level."""
    out = b"\x45"  # the innermost: list0
    for _ in range(depth):
        out = b"\xd0" + struct.pack(">II", len(out) + 4, 1) + out
    return out


def map8_with(key: str, value: bytes) -> bytes:
    key_bytes = b"\xa1" + bytes([len(key)]) + key.encode()
    inner = bytes([2]) + key_bytes + value
    if len(inner) < 256:
        return b"\xc1" + bytes([len(inner)]) + inner
    return b"\xd1" + struct.pack(">II", len(inner) + 4, 2) + key_bytes + value


BOMBS = {
    "array-of-4-billion-in-application-properties": b"\x00\x53\x74" + map8_with("k", ARRAY_BOMB)
    + encode(Described(ulong(0x77), "bomb")),
    "array-of-4-billion-as-body": b"\x00\x53\x77" + ARRAY_BOMB,
    "nesting-100k-in-application-properties": b"\x00\x53\x74" + map8_with("deep", nested_lists(100_000))
    + encode(Described(ulong(0x77), "bomb")),
    "nesting-100k-as-body": b"\x00\x53\x77" + nested_lists(100_000),
    "nesting-100k-in-message-annotations": b"\x00\x53\x72" + map8_with("x-opt-deep", nested_lists(100_000))
    + encode(Described(ulong(0x77), "bomb")),
}


# -- reading frames -------------------------------------------------------------------------------


@dataclass
class Frame:
    channel: int
    frame_type: int
    name: str | None  # None for an empty (heartbeat) frame
    fields: list = field(default_factory=list)
    payload: bytes = b""
    link: str | None = None  # attach, flow, transfer, detach: the link's name (handles are per side)

    def field(self, index: int, default: Any = None) -> Any:
        return self.fields[index] if index < len(self.fields) else default

    @property
    def error(self) -> str | None:
        """The condition of a detach (field 2), end or close (field 0)."""
        index = {"detach": 2, "end": 0, "close": 0}.get(self.name)
        if index is None:
            return None
        err = self.field(index)
        if isinstance(err, Described) and err.value:
            return str(err.value[0])
        return None

    @property
    def description(self) -> str | None:
        index = {"detach": 2, "end": 0, "close": 0}.get(self.name)
        err = self.field(index) if index is not None else None
        if isinstance(err, Described) and len(err.value) > 1:
            return err.value[1]
        return None


def decode_frame(raw: bytes) -> Frame:
    _size, doff, frame_type, channel = struct.unpack(">IBBH", raw[:8])
    body = raw[doff * 4:]
    if not body:
        return Frame(channel, frame_type, None)
    data = Data()
    used = data.decode(body)
    data.rewind()
    data.next()
    value = data.get_object()
    name = NAMES.get(int(value.descriptor), f"0x{int(value.descriptor):x}")
    return Frame(channel, frame_type, name, list(value.value or []), bytes(body[used:]))


PROBE_CHANNEL = 9
# A valid begin on a channel of its own: sent after a suspect frame, its answer shows the broker
# carried on.
PROBE = performative("begin", [None, uint(0), uint(10), uint(10)], PROBE_CHANNEL)


class Closed(Exception):
    """The broker closed the socket."""


class RawClient:
    """One socket to the broker; `frames` keeps every frame received, in order."""

    def __init__(self, address: str, timeout: float = 10.0):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.timeout = timeout
        self._buffer = b""
        self._header_read = False
        self.frames: list[Frame] = []
        self.eof = False
        self._link_names: dict[tuple[int, int], str] = {}  # (channel, broker's handle) -> name
        self.peer_channels: dict[int, int] = {}  # our channel -> the broker's, learnt by begin()

    # -- writing
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def handshake(self, container_id: str = "hostile", **open_kw: Any) -> Frame:
        """SASL ANONYMOUS, the AMQP header, open; returns the broker's open."""
        self.send(SASL_HEADER)
        self._read_exact(8)
        self.expect("sasl-mechanisms")
        self.send(frame(encode(described(CODES["sasl-init"], [symbol("ANONYMOUS"), b""])), 0, 1))
        outcome = self.expect("sasl-outcome")
        assert int(outcome.field(0)) == 0, f"SASL refused: {outcome}"
        self.send(AMQP_HEADER)
        self._read_exact(8)
        self.send(performative("open", open_fields(container_id, **open_kw)))
        return self.expect("open")

    def begin(self, channel: int = 0, **kw: Any) -> Frame:
        """Begin a session on our `channel`; the broker answers on a channel of its own choosing
        (channels are numbered per direction), naming ours as the remote-channel."""
        self.send(performative("begin", begin_fields(**kw), channel))
        reply = self.expect("begin", lambda f: f.field(0) is not None and int(f.field(0)) == channel)
        self.peer_channels[channel] = reply.channel
        return reply

    def peer_channel(self, channel: int) -> int:
        """The broker's channel number for our session on `channel` (the same, unless begin()
        learnt otherwise)."""
        return self.peer_channels.get(channel, channel)

    def attach_sender(self, handle: int, address: str, channel: int = 0,
                      name: str | None = None) -> Frame:
        """Attach a sender; returns the broker's attach (the first flow may follow)."""
        name = name or f"snd-{handle}"
        self.send(performative("attach", attach_fields(name, handle, SENDER, address), channel))
        return self.expect("attach", lambda f: f.channel == self.peer_channel(channel) and f.link == name)

    def attach_receiver(self, handle: int, address: str, channel: int = 0, credit: int = 0,
                        name: str | None = None, src: Described | None = None) -> Frame:
        name = name or f"rcv-{handle}"
        self.send(performative("attach", attach_fields(name, handle, RECEIVER, address, src=src),
                               channel))
        reply = self.expect("attach", lambda f: f.channel == self.peer_channel(channel) and f.link == name)
        if credit:
            self.send(performative("flow", flow_fields(handle, credit), channel))
        return reply

    # -- reading
    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no frame from the broker in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except TimeoutError:
            raise TimeoutError("no frame from the broker in time") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            raise Closed("the broker closed the connection")
        self._buffer += chunk

    def _read_exact(self, n: int, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self._buffer) < n:
            self._fill(deadline)
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def read_frame(self, timeout: float | None = None) -> Frame:
        """The next non-empty frame (heartbeats are skipped)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            while len(self._buffer) < 4:
                self._fill(deadline)
            size = struct.unpack(">I", self._buffer[:4])[0]
            if size < 8:
                raise AssertionError(f"bad frame size {size} from the broker")
            while len(self._buffer) < size:
                self._fill(deadline)
            raw, self._buffer = self._buffer[:size], self._buffer[size:]
            f = decode_frame(raw)
            if f.name is None:
                continue
            self._name_link(f)
            self.frames.append(f)
            return f

    def _name_link(self, f: Frame) -> None:
        """The broker's handles are its own: a frame's link is found through its attach."""
        handle_at = {"attach": 1, "flow": 4, "transfer": 0, "detach": 0}.get(f.name)
        handle = f.field(handle_at) if handle_at is not None else None
        if handle is None:
            return
        key = (f.channel, int(handle))
        if f.name == "attach":
            self._link_names[key] = f.field(0)
        f.link = self._link_names.get(key)

    def expect(self, name: str, where=lambda f: True, timeout: float | None = None) -> Frame:
        """Read until a frame named `name` that satisfies `where`; fail on close or timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            f = self.read_frame(max(0.001, deadline - time.monotonic()))
            if f.name == name and where(f):
                return f
            if f.name == "close" and name != "close":
                raise AssertionError(f"connection closed while waiting for {name}: {f.error} "
                                     f"{f.description}")

    def read_until_closed(self, timeout: float | None = None) -> list[Frame]:
        """Every frame until the broker closes the socket (or the timeout)."""
        got: list[Frame] = []
        try:
            while True:
                got.append(self.read_frame(timeout))
        except (Closed, TimeoutError):
            return got

    def answer(self, bound: float) -> str:
        """After a suspect frame and PROBE: 'carried on' (the probe's begin came back), or
        '<close|end|detach> <condition>' for what ended things, or 'no answer' / 'dropped
        without a close' when the broker went silent or hung up without saying why."""
        try:
            while True:
                f = self.read_frame(bound)
                # The broker answers on a channel of its own choosing; its begin names the
                # probe's channel in remote-channel (field 0).
                if f.name == "begin" and f.field(0) == PROBE_CHANNEL:
                    return "carried on"
                if f.name == "close":
                    return f"close {f.error}"
                if f.name in ("end", "detach") and f.error:
                    return f"{f.name} {f.error}"
        except Closed:
            closes = [f for f in self.frames if f.name == "close"]
            return f"close {closes[-1].error}" if closes else "dropped without a close"
        except TimeoutError:
            return "no answer"

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
