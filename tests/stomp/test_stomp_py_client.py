"""Frames written by a real client library, stomp.py (PyPI), read by the parser; and the broker's
frames read by stomp.py's own frame reader. Offline: stomp.py's protocol classes write into a
transport stub that keeps the bytes, as its socket transport would send them (`convert_frame`,
`pack`), so nothing here opens a socket."""

from __future__ import annotations

import pytest
import stomp.protocol as stomp_protocol  # stomp.py, in the `test` extra: a missing install fails here
import stomp.utils as stomp_utils

from hermod.broker.stomp import HEARTBEAT, FrameParser, encode_frame, negotiate_version


class Wire:
    """What stomp.py's transport needs from a transport to write frames, keeping the bytes."""

    current_host_and_port = ("localhost", 61613)
    vhost = None

    def __init__(self) -> None:
        self.data = bytearray()

    def set_listener(self, name, listener) -> None:
        pass

    def is_connected(self) -> bool:
        return True

    def transmit(self, frame) -> None:
        self.data += stomp_utils.pack(stomp_utils.convert_frame(frame))


PROTOCOLS = {"1.0": stomp_protocol.Protocol10, "1.1": stomp_protocol.Protocol11, "1.2": stomp_protocol.Protocol12}
AWKWARD = "a:b\\c\nd"


def client_session(version: str) -> bytes:
    wire = Wire()
    proto = PROTOCOLS[version](wire)
    proto.set_receipt = lambda receipt, command: None  # the connection class's, not the protocol's
    proto.connect("alice", "se:cret\\", wait=False)
    proto.send("/queue/orders", "hello", content_type="text/plain", receipt="r1")
    proto.send("/topic/prices", b"\x00bin\x00ary\x00", headers={"amq-msg-type": "bytes"})
    wire.transmit(stomp_utils.Frame(None, {}, None))  # a heart-beat, as its heart-beat thread sends it
    proto.subscribe("/queue/orders", id="s1", ack="client-individual", headers={"selector": "colour = 'red'"})
    if version != "1.0":
        proto.send("/queue/orders", "x", headers={"note": AWKWARD})
        proto.ack("m1", "s1") if version == "1.1" else proto.ack("m1")
        proto.nack("m2", "s1") if version == "1.1" else proto.nack("m2")
    proto.begin("tx1")
    proto.commit("tx1")
    proto.unsubscribe("s1")
    proto.disconnect(receipt="bye")
    return bytes(wire.data)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_a_stomp_py_session_parses(version, piece):
    data = client_session(version)
    parser = FrameParser()
    out = []
    for i in range(0, len(data), piece):
        out += parser.feed(data[i:i + piece])
        if parser.version is None and any(f is not HEARTBEAT and f.command in ("STOMP", "CONNECT") for f in out):
            parser.version = version  # the adapter negotiates it on CONNECT, then parses on
            out += parser.feed(b"")
    frames = [f for f in out if f is not HEARTBEAT]
    assert HEARTBEAT in out and parser.buffered() == 0
    commands = [f.command for f in frames]
    expected = ["STOMP" if version != "1.0" else "CONNECT", "SEND", "SEND", "SUBSCRIBE"]
    expected += ["SEND", "ACK", "NACK"] if version != "1.0" else []
    assert commands == expected + ["BEGIN", "COMMIT", "UNSUBSCRIBE", "DISCONNECT"]

    connect = frames[0]
    assert connect.header("login") == "alice" and connect.header("passcode") == "se:cret\\"
    if version != "1.0":
        assert negotiate_version(connect.header("accept-version")) == version
    text, binary = frames[1], frames[2]
    assert (text.header("destination"), text.header("receipt"), text.body) == ("/queue/orders", "r1", b"hello")
    assert binary.body == b"\x00bin\x00ary\x00" and binary.header("content-length") == "9"
    assert frames[3].header("selector") == "colour = 'red'"
    assert frames[3].header("ack") == "client-individual"
    if version != "1.0":
        assert frames[4].header("note") == AWKWARD
        assert frames[5].header("id" if version == "1.2" else "message-id") == "m1"
    assert frames[-1].header("receipt") == "bye"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_stomp_py_reads_the_brokers_frames(version):
    headers = [("subscription", "s1"), ("message-id", "m:1"), ("destination", "/queue/orders"), ("note", AWKWARD)]
    data = encode_frame("MESSAGE", headers, b"hello", version)
    frame = stomp_utils.parse_frame(data[:-1])  # its transport cuts the NUL off before parsing
    assert frame.cmd == "MESSAGE"
    assert frame.headers["message-id"] == "m:1" and frame.headers["note"] == AWKWARD
    assert frame.headers["content-length"] == "5" and frame.body == b"hello"
