"""Hostile MQTT clients against a live broker: malformed remaining lengths, packets over
max_message_size (refused as the bytes arrive), a SUBSCRIBE with 10,000 filters, a client that
never reads with a QoS 1 backlog (bounded; nothing lost), and a fuzz of the packet decoder
through the socket. Every time a bystander's round trip must go on, and the broker must not
log a traceback."""
from __future__ import annotations

import random
import socket
import sys
from pathlib import Path

import pytest

from hermod.broker.mqtt import Connect, Disconnect, PubAck, Publish, SubAck, Subscribe, Subscription, encode
from hermod.broker.mqtt.properties import Properties
from hermod_testing import wait_for
from mqtt_clients import V311, Client, Raw, host_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "http"))
from http_helpers import call, http_url  # noqa: E402

MAX = 256 * 1024  # a SUBSCRIBE of 10,000 filters (~90 KB) fits; 1 MiB does not


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config=f"[server]\nmax_message_size = {MAX}\n")


@pytest.fixture(scope="module")
def bystander(broker):
    c = Client(broker, V311)
    c.subscribe("by/echo", qos=1)
    yield c
    c.close()


def round_trip(bystander, tag: str) -> None:
    bystander.publish("by/echo", tag.encode(), qos=1)
    wait_for(lambda: tag.encode() in bystander.payloads(), message=f"bystander round trip {tag}")


def no_traceback(broker) -> None:
    assert not [line for line in broker.stderr_lines if "Traceback" in line], "".join(broker.stderr_lines[-40:])


def connected(broker, client_id: str, version: int = 4) -> socket.socket:
    host, port = host_port(broker)
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(encode(Connect(client_id, version, True, 60), version))
    assert s.recv(64)[:1] == b"\x20"
    return s


def closed_by_broker(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def test_malformed_remaining_length_closes_only_that_connection(broker, bystander):
    s = connected(broker, "bad-len")
    s.sendall(b"\x30\xff\xff\xff\xff\x01")  # a fifth length byte
    closed_by_broker(s)
    s.close()
    round_trip(bystander, "after-bad-length")
    no_traceback(broker)


@pytest.mark.parametrize("version", [4, 5])
def test_packet_over_max_message_size_refused_before_its_body(broker, bystander, version):
    s = connected(broker, f"too-big-{version}", version)
    header = b"\x30" + bytes((0x80, 0x80, 0x40))  # announces 1 MiB; no body sent
    s.sendall(header)
    answer = closed_by_broker(s)
    if version == 5:
        assert answer == encode(Disconnect(0x95), 5)
    s.close()
    round_trip(bystander, f"after-too-big-{version}")


def test_subscribe_with_ten_thousand_filters_is_bounded(broker, bystander):
    raw = Raw(broker, "many-filters", version=5)
    filters = [Subscription(f"mf/{i}", 0) for i in range(10_000)]
    raw.send(Subscribe(1, filters))
    raw.sock.settimeout(60)
    ack = raw.recv_type(SubAck)
    assert len(ack.reason_codes) == 10_000
    granted = sum(1 for c in ack.reason_codes if c == 0)
    assert 0 < granted <= 1000 and set(ack.reason_codes[granted:]) == {0x97}
    round_trip(bystander, "after-many-filters")
    raw.send(Disconnect())
    raw.close()
    no_traceback(broker)


def test_client_that_never_reads_is_bounded_and_loses_nothing(broker, bystander):
    raw = Raw(broker, "never-reads", version=4, clean=False)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    raw.send(Subscribe(1, [Subscription("nr/t", 1)]))
    raw.recv_type(SubAck)
    pub = Client(broker, V311)
    body = b"x" * 8000
    total = 600  # ~4.8 MB: far past the socket buffers and the broker's output mark
    for i in range(total):
        pub.publish("nr/t", body + str(i).encode(), qos=1, wait=False)
    wait_for(lambda: len(pub.published) == total, timeout=60, message="every publish acknowledged")
    round_trip(bystander, "while-a-client-does-not-read")
    # Bounded: what the broker wrote stops at the socket's output mark; the rest waits on the
    # subscription's queue, not in the broker's output buffer.
    status, queue = call(http_url(broker), "GET", "/api/queues/never-reads.nr.t")
    assert status == 200
    assert queue["messages"] == total
    assert queue["messages"] - queue["delivering"] > total // 2, queue
    got = set()
    raw.sock.settimeout(30)
    while len(got) < total:
        p = raw.recv_type(Publish)
        got.add(p.payload)
        raw.send(PubAck(p.packet_id))
    assert len(got) == total
    pub.close()
    raw.close()
    no_traceback(broker)


def test_fuzzed_packets_through_the_socket(broker, bystander):
    rng = random.Random(1234)
    good = [encode(Publish("fz/t", b"p", 1, packet_id=5), 5),
            encode(Subscribe(2, [Subscription("fz/#", 1)]), 5),
            encode(Publish("fz/t", b"q", 0, properties=Properties(user_properties=(("a", "b"),))), 5),
            encode(PubAck(9), 5)]
    for round_ in range(60):
        s = connected(broker, f"fuzz-{round_}", 5 if round_ % 2 else 4)
        data = bytearray(rng.choice(good))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if round_ % 5 == 0:
            data = bytearray(rng.randbytes(rng.randint(1, 64)))
        s.sendall(bytes(data))
        s.settimeout(0.2)
        try:
            s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            pass
        s.close()
    round_trip(bystander, "after-fuzz")
    no_traceback(broker)


def test_an_unfinished_packet_counts_against_the_memory_limit(start_broker):
    """Contract, "Delivery guarantees and limits": every byte held for a client counts against
    max_memory_mb, a packet still arriving included. Under a 2 MiB limit, a PUBLISH announcing
    6 MiB whose body keeps coming is refused (5.0: DISCONNECT 0x97) once its held bytes pass the
    limit, long before max_message_size; another client still publishes and receives."""
    small = start_broker(config="[server]\nmax_memory_mb = 2\n")
    s = connected(small, "unfinished", 5)
    size = 6 << 20
    length = bytes(((size >> (7 * i)) & 0x7F) | (0x80 if i < 3 else 0) for i in range(4))  # variable byte int
    s.sendall(b"\x30" + length + b"\x00\x03a/b\x00")
    chunk = b"m" * 65536
    for _ in range(size // len(chunk)):
        try:
            s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            break
    refused = closed_by_broker(s)
    assert refused == encode(Disconnect(0x97), 5)
    s.close()
    wait_for(lambda: any("memory limit" in line for line in small.stderr_lines),
             message="a log line naming the memory limit")
    other = Client(small, V311)
    other.subscribe("mem/echo", qos=1)
    other.publish("mem/echo", b"still here", qos=1)
    wait_for(lambda: b"still here" in other.payloads(), message="a round trip after the refusal")
    other.close()
