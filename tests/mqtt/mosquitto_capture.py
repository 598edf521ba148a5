"""Real MQTT packets for golden tests: Debian's Mosquitto 2.0 on a free port, paho-mqtt talking
to it through a small recording TCP proxy, so both directions of every connection are captured
byte for byte (client -> broker and broker -> client)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

import pytest

from hermod_testing import wait_for


def mosquitto_binary() -> str:
    path = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
    if path is None:
        pytest.skip("mosquitto is not installed (make test installs it)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mosquitto:
    """A private Mosquitto: anonymous, no persistence, on a free local port."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="hermod-mosquitto-")
        self.port = _free_port()
        conf = os.path.join(self.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "log_dest stderr\n")
        self.proc = subprocess.Popen([mosquitto_binary(), "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "log"), "w"))
        wait_for(self._accepts, timeout=10, message="mosquitto listening")

    def _accepts(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"mosquitto exited: {open(os.path.join(self.dir, 'log')).read()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Recorded:
    to_broker: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)


class RecordingProxy:
    """Accepts on a free port and forwards each connection to `port`, recording both ways."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[Recorded] = []
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.upstream))
            rec = Recorded()
            self.connections.append(rec)
            self._sockets += [client, broker]
            for src, dst, buf in ((client, broker, rec.to_broker), (broker, client, rec.to_client)):
                t = threading.Thread(target=self._pump, args=(src, dst, buf), daemon=True)
                t.start()
                self._threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        try:
            while data := src.recv(65536):
                buf += data
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.server.close()
        for t in self._threads:
            t.join(10)
        for s in self._sockets:
            s.close()


def split_packets(data: bytes) -> list[bytes]:
    """Whole packets out of a recorded stream (the test's own simple framing, independent of
    the reader under test)."""
    out = []
    pos = 0
    while pos < len(data):
        length, shift, i = 0, 0, pos + 1
        while True:
            b = data[i]
            i += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append(bytes(data[pos:i + length]))
        pos = i + length
    return out
