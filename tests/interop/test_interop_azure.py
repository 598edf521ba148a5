"""Azure's pure-Python AMQP stack (`azure.servicebus._pyamqp`, from azure-servicebus) against Hermod.

The Azure SDKs talk to Service Bus / Event Hubs with CBS tokens over TLS, but `_pyamqp` is a
general AMQP 1.0 client: with `use_tls=False` and a SASL ANONYMOUS or PLAIN credential it talks to
a plain broker. interop/setup.sh installs it under interop/azure/build/site (not the project's venv).

It reads every performative's descriptor as the one-byte smallulong form (`00 53 <code>`), as all
other peers write them; a full 8-byte ulong descriptor (legal AMQP) makes it misread the frame.
Hermod's own SASL layer wrote sasl-outcome that way, so this client could not log in at all.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys

import pytest

from hermod_testing import BrokerProcess
from interop_clients import INTEROP, setup_component

sys.path.insert(0, str(INTEROP / "fidelity"))
import canon  # noqa: E402

AZURE = INTEROP / "azure"


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(["--port", "0", "--store", "memory"], tmp_path).start()
    yield b
    b.stop()


def _read_frame(sock: socket.socket) -> bytes:
    """One frame's body (after the 8-byte header and any extended header)."""
    header = _read_exactly(sock, 8)
    size, doff = struct.unpack(">IB", header[:5])
    rest = _read_exactly(sock, size - 8)
    return rest[doff * 4 - 8:]


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"connection closed after {len(data)} of {n} bytes"
        data += chunk
    return data


def test_sasl_frames_carry_the_compact_descriptor(broker):
    """sasl-mechanisms and sasl-outcome start `00 53 <code>`, the form every AMQP peer writes."""
    host, port = broker.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"AMQP\x03\x01\x00\x00")
        assert _read_exactly(sock, 8) == b"AMQP\x03\x01\x00\x00"
        mechanisms = _read_frame(sock)
        assert mechanisms[:3] == b"\x00\x53\x40"
        # sasl-init: mechanism ANONYMOUS, empty initial response
        init = b"\x00\x53\x41" + b"\xc0\x0e\x02" + b"\xa3\x09ANONYMOUS" + b"\xa0\x00"
        sock.sendall(struct.pack(">IBBH", 8 + len(init), 2, 1, 0) + init)
        outcome = _read_frame(sock)
    assert outcome[:3] == b"\x00\x53\x44", outcome.hex()
    assert outcome[3:] == b"\xc0\x03\x01\x50\x00", outcome.hex()  # code ok


def _azure(args: list[str], timeout: float = 60) -> list[dict]:
    setup_component("azure")
    proc = subprocess.run([sys.executable, str(AZURE / "pyamqpclient.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return events


def _round_trip(url: str, tmp_path, address: str) -> None:
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps({"n": i, "sections": [
        [0x73, {"list": [{"string": f"id-{i}"}, {"null": None}, {"null": None}, {"string": "azure"}]}],
        [0x74, {"map": [[{"string": "n"}, {"long": str(i)}]]}],
        [0x77, {"string": f"message {i}"}]]}) + "\n" for i in range(3)))
    sent = _azure(["send", "--url", url, "--address", address, "--spec", str(spec), "--sent", str(tmp_path / "s.bin")])
    assert [e["n"] for e in sent if e["event"] == "settled" and e["state"] == "accepted"] == [0, 1, 2]
    got = _azure(["receive", "--url", url, "--address", address, "--count", "3", "--output", str(tmp_path / "r.bin")])
    assert [e["n"] for e in got if e["event"] == "message"] == [0, 1, 2]
    received = [canon.decode_message(m) for m in canon.read_frames(tmp_path / "r.bin")]
    assert [m[-1] for m in received] == [[0x77, {"string": f"message {i}"}] for i in range(3)]
    assert [[s for s in m if s[0] == 0x74] for m in received] == \
        [[[0x74, {"map": [[{"string": "n"}, {"long": str(i)}]]}]] for i in range(3)]


def test_azure_pyamqp_round_trip_with_sasl_anonymous(broker, tmp_path):
    _round_trip(broker.url, tmp_path, "azure.anonymous")


def test_azure_pyamqp_round_trip_with_sasl_plain(tmp_path):
    """Anonymous logins off: the client logs in with PLAIN (user:password in the URL)."""
    cfg = tmp_path / "hermod.toml"
    cfg.write_text("[security]\nanonymous = false\n")
    add = subprocess.run([sys.executable, "-m", "hermod.broker", "user", "add", "--config", str(cfg), "azure",
                          "--password", "az-pw", "--role", "admin"], capture_output=True, text=True, timeout=60)
    assert add.returncode == 0, add.stderr
    b = BrokerProcess(["--config", str(cfg), "--port", "0", "--store", "memory"], tmp_path).start()
    try:
        host = b.address
        _round_trip(f"amqp://azure:az-pw@{host}", tmp_path, "azure.plain")
    finally:
        b.stop()
