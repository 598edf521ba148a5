"""Per-listener max_frame_size (issue 17 item 3): each `[[listener]]` advertises its own value in
its open frame, and multi-frame transfers at sizes across the frame boundaries arrive byte for
byte through a 512-byte and a 1 MiB listener, over TCP and over WebSocket. The client's own max
frame size is the listener's too, so the broker's deliveries are split into frames of that size
as well: both directions cross the boundaries."""
from __future__ import annotations

import socket
import time

import proton
import pytest

from ws_client import WsSocket

KIB, MIB = 1024, 1024 * 1024
WRITE_STEP = 64 * KIB
LISTENERS = {"small": (512, False), "big": (MIB, False), "small-ws": (512, True), "big-ws": (MIB, True)}


def config() -> str:
    text = "[server]\nmax_frame_size = 4096\n"
    for name, (size, ws) in LISTENERS.items():
        text += (f'[[listener]]\nname = "{name}"\nhost = "127.0.0.1"\nport = 0\nmax_frame_size = {size}\n'
                 f'websocket = {str(ws).lower()}\n')
    return text


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from hermod_testing import BrokerProcess
    d = tmp_path_factory.mktemp("frames")
    (d / "hermod.toml").write_text(config())
    b = BrokerProcess(["--port", "0", "--store", "memory", "--config", str(d / "hermod.toml")], d).start()
    yield b
    b.stop()


def address(broker, name: str) -> str:
    line = next(l for l in broker.stdout_lines if l.startswith(f"hermod listener {name} on "))
    return line.split("://", 1)[1].strip()


class Peer:
    """A Proton engine (client side) over a TCP socket or a WsSocket, with its own max frame."""

    def __init__(self, sock, max_frame: int | None):
        self.sock = sock
        self.conn = proton.Connection()
        self.transport = proton.Transport()
        if max_frame is not None:
            self.transport.max_frame_size = max_frame
        self.transport.bind(self.conn)
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()

    @classmethod
    def connect(cls, broker, name: str, max_frame: int | None = None) -> Peer:
        addr = address(broker, name)
        if LISTENERS[name][1]:
            sock = WsSocket.connect(addr, timeout=60)
        else:
            host, port = addr.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=60)
        return cls(sock, max_frame)

    def pump(self, until, timeout: float = 120) -> None:
        """Write and read in turns (at most WRITE_STEP bytes at a time), so neither side's
        buffers fill while the other waits: the broker stops reading from a client that does
        not read its deliveries."""
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "timed out"
            out = self.transport.pending()
            if out > 0:
                n = min(out, WRITE_STEP)
                self.sock.sendall(self.transport.peek(n))
                self.transport.pop(n)
            self.sock.settimeout(0.001 if self.transport.pending() > 0 else 0.2)
            try:
                data = self.sock.recv(1024 * 1024)
            except socket.timeout:
                continue
            assert data, f"the broker closed the connection: {self.conn.remote_condition}"
            while data:
                capacity = self.transport.capacity()
                assert capacity > 0, f"transport error: {self.transport.condition}"
                self.transport.push(data[:capacity])
                data = data[capacity:]

    def opened(self) -> int:
        self.pump(lambda: self.conn.state & proton.Endpoint.REMOTE_ACTIVE)
        return self.transport.remote_max_frame_size

    def round_trip(self, queue: str, bodies: list[bytes]) -> list[bytes]:
        """Send each body (one data section) and take them back: the encoded messages the broker
        delivered, and the outcomes it gave the sends."""
        sender = self.session.sender("s-" + queue)
        sender.target.address = queue
        sender.open()
        receiver = self.session.receiver("r-" + queue)
        receiver.source.address = queue
        receiver.open()
        receiver.flow(len(bodies))
        self.pump(lambda: sender.credit >= 1)
        outcomes = []
        for i, body in enumerate(bodies):
            self.pump(lambda: sender.credit >= 1)
            d = sender.delivery(str(i).encode())
            sender.send(proton.Message(body=body).encode())
            sender.advance()
            outcomes.append(d)
        got: list[bytes] = []

        def take() -> bool:
            while receiver.current is not None and not receiver.current.partial:
                d = receiver.current
                got.append(receiver.recv(d.pending))
                d.update(proton.Delivery.ACCEPTED)
                d.settle()  # which also advances the link to the next delivery
            return len(got) == len(bodies) and all(o.remote_state for o in outcomes)

        self.pump(take)
        assert [o.remote_state for o in outcomes] == [proton.Delivery.ACCEPTED] * len(bodies)
        return got


def pattern(n: int, size: int) -> bytes:
    block = bytes((i * 7 + n) % 256 for i in range(256))
    return (block * (size // 256 + 1))[:size]


def test_each_listener_advertises_its_own_max_frame_size(broker):
    for name, (size, _) in LISTENERS.items():
        peer = Peer.connect(broker, name)
        assert peer.opened() == size, name
        peer.sock.close()
    host, port = broker.address.rsplit(":", 1)
    main = Peer(socket.create_connection((host, int(port)), timeout=10), None)
    assert main.opened() == 4096  # [server] keeps its own
    main.sock.close()


@pytest.mark.parametrize("name", list(LISTENERS))
def test_multi_frame_transfers_arrive_byte_for_byte(broker, name):
    frame = LISTENERS[name][0]
    sizes = [0, 1, frame - 1, frame, frame + 1, 3 * frame + 7, MIB, 10 * MIB]
    peer = Peer.connect(broker, name, max_frame=frame)
    assert peer.opened() == frame
    bodies = [pattern(n, size) for n, size in enumerate(sizes)]
    got = peer.round_trip(f"q.frames.{name}", bodies)
    for n, (encoded, body) in enumerate(zip(got, bodies)):
        message = proton.Message()
        message.decode(encoded)
        assert message.body == body, f"{name}: message {n} of {len(body)} bytes differs"
    # Byte for byte: the bare message the broker delivered is the one that was sent (the
    # broker adds no header or annotations to these).
    assert got == [proton.Message(body=b).encode() for b in bodies]
    peer.sock.close()


@pytest.mark.parametrize("config, path", [
    ('[[listener]]\nname = "tiny"\nport = 0\nmax_frame_size = 100\n', "listener[0].max_frame_size"),
    ("[server]\nmax_frame_size = 511\n", "server.max_frame_size"),
])
def test_max_frame_size_below_amqp_minimum_is_refused_at_start(tmp_path, config, path):
    """Proton would quietly advertise 512 instead (AMQP's MIN-MAX-FRAME-SIZE): say so at start."""
    import subprocess
    import sys
    (tmp_path / "bad.toml").write_text(config)
    r = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--http-port", "-1", "--store",
                        "memory", "--config", str(tmp_path / "bad.toml")], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}: expected a frame size of at least 512 bytes" in lines[0], r.stderr
