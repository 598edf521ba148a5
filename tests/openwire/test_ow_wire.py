"""OpenWire at the byte level against a real broker (the sans-IO codec as a raw client):
negotiation order, keep-alive and the inactivity drop, refusals before ConnectionInfo, and
hostile input (a command over max_message_size refused as its size arrives, garbage after the
handshake) closing only that connection."""
from __future__ import annotations

import socket
import time

import pytest
from owclient import OwClient
from test_ow_basic import port_of, receive_all

from hermod.broker.openwire import OpenWireCodec, model, wire_format_info
from hermod.broker.openwire.framing import frame


class RawClient:
    def __init__(self, broker, **wire) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port_of(broker)), timeout=10)
        self.codec = OpenWireCodec(max_command_size=1 << 24, preferred=wire_format_info(**wire))
        self.pending: list = []

    def hello(self) -> None:
        self.sock.sendall(self.codec.hello())

    def send(self, command) -> None:
        self.sock.sendall(self.codec.encode(command))

    def read(self, timeout: float = 10):
        """The next command, or None when the broker closed the connection."""
        deadline = time.monotonic() + timeout
        while not self.pending:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.pending.extend(self.codec.feed(data))
        return self.pending.pop(0)

    def until_closed(self, timeout: float = 10) -> list:
        seen = []
        while True:
            command = self.read(timeout)
            if command is None:
                return seen
            seen.append(command)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config="[server]\nmax_message_size = 65536\n")


def connected(broker, **wire) -> RawClient:
    c = RawClient(broker, **wire)
    c.hello()
    assert isinstance(c.read(), model.WireFormatInfo)
    assert isinstance(c.read(), model.BrokerInfo)
    c.send(model.ConnectionInfo(command_id=1, response_required=True, connection_id=model.ConnectionId("ID:raw-1")))
    answer = c.read()
    assert isinstance(answer, model.Response) and answer.correlation_id == 1
    return c


def test_the_broker_sends_its_wireformatinfo_then_brokerinfo(broker):
    c = RawClient(broker)
    try:
        c.hello()
        first, second = c.read(), c.read()
        assert isinstance(first, model.WireFormatInfo) and first.magic == b"ActiveMQ"
        assert first.version == 12
        assert isinstance(second, model.BrokerInfo) and second.broker_name == "hermod"
        n = c.codec.negotiated
        assert n is not None and n.tight and n.cache
    finally:
        c.close()


@pytest.mark.parametrize("version,tight", [(9, False), (10, True), (11, False), (12, False)])
def test_every_version_and_encoding_connects_and_sends(broker, version, tight):
    c = connected(broker, version=version, tight=tight, cache=tight)
    try:
        session = model.SessionId("ID:raw-1", 1)
        producer = model.ProducerId("ID:raw-1", 1, 1)
        c.send(model.SessionInfo(command_id=2, response_required=True, session_id=session))
        assert isinstance(c.read(), model.Response)
        c.send(model.ProducerInfo(command_id=3, response_required=True, producer_id=producer,
                                  destination=model.Queue(f"raw.v{version}")))
        assert isinstance(c.read(), model.Response)
        from hermod.broker.openwire import bodies
        c.send(model.ActiveMQTextMessage(command_id=4, response_required=True, producer_id=producer,
                                         destination=model.Queue(f"raw.v{version}"), persistent=True,
                                         message_id=model.MessageId(None, producer, 1), content=bodies.encode_text("v")))
        answer = c.read()
        assert isinstance(answer, model.Response) and answer.correlation_id == 4
    finally:
        c.close()


def test_a_command_before_connectioninfo_is_refused(broker):
    c = RawClient(broker)
    try:
        c.hello()
        c.read(), c.read()
        c.send(model.SessionInfo(command_id=7, response_required=True, session_id=model.SessionId("x", 1)))
        answer = c.read()
        assert isinstance(answer, model.ExceptionResponse) and answer.correlation_id == 7
    finally:
        c.close()


def test_a_silent_client_is_dropped_after_max_inactivity_and_keepalives_keep_one_alive(broker):
    silent = connected(broker, max_inactivity_duration=600, max_inactivity_initial_delay=0)
    talking = connected(broker, max_inactivity_duration=600, max_inactivity_initial_delay=0)
    try:
        start = time.monotonic()
        seen_keepalive = False
        while time.monotonic() - start < 2.5:
            try:
                command = talking.read(0.2)
            except TimeoutError:
                command = None
            if isinstance(command, model.KeepAliveInfo):
                seen_keepalive = True
            talking.send(model.KeepAliveInfo())
        assert seen_keepalive, "the broker writes KeepAliveInfo when it has nothing else to say"
        seen = silent.until_closed(timeout=5)
        assert time.monotonic() - start < 6
        assert any(isinstance(x, model.ConnectionError) and "inactive" in x.exception.message for x in seen)
        talking.send(model.KeepAliveInfo(command_id=9, response_required=True))
        assert isinstance(talking.read(), model.KeepAliveInfo)  # still there, and answered
    finally:
        silent.close()
        talking.close()


def test_a_command_over_max_message_size_is_refused_as_its_size_arrives(broker):
    c = connected(broker)
    try:
        # Only the size prefix of a 10 MiB command: the broker refuses it without waiting for it.
        c.sock.sendall((10 << 20).to_bytes(4, "big"))
        seen = c.until_closed(timeout=10)
        errors = [x for x in seen if isinstance(x, model.ConnectionError)]
        assert errors and "over the limit" in errors[0].exception.message
    finally:
        c.close()


def test_garbage_after_the_handshake_closes_that_connection_only(broker):
    other = OwClient(port_of(broker))
    try:
        other.connect()
        other("session", "s", "false", "auto")
        other("producer", "p", "s", "queue:raw.bystander", "persistent")
        c = connected(broker)
        try:
            c.sock.sendall(frame(bytes([0xEE]) + b"garbage-garbage"))
            assert c.until_closed(timeout=10) is not None
        finally:
            c.close()
        other("send", "p", "text", "still-here")
        other("consumer", "c", "s", "queue:raw.bystander")
        assert other.receive("c")["body"] == "still-here"
    finally:
        other.close()


def test_a_consumer_that_never_acks_holds_only_its_prefetch(broker):
    """Prefetch 1000 and never an ack: it is sent 1,000 messages, no more; the rest go to another
    consumer, and the hoarder's messages come back when it goes."""
    hoarder = OwClient(port_of(broker))
    other = OwClient(port_of(broker), "jms.prefetchPolicy.all=10")
    try:
        hoarder.connect()
        hoarder("session", "s", "false", "client")
        hoarder("consumer", "c", "s", "queue:raw.hoard")
        assert hoarder.receive("c", 300) is None
        other.connect()
        other("session", "s", "false", "auto")
        other("producer", "p", "s", "queue:raw.hoard", "persistent")  # answered: routed before the next
        for i in range(1200):
            other("send", "p", "text", f"h{i}")
        other("consumer", "c", "s", "queue:raw.hoard")
        got = receive_all(other, "c", 200)
        assert [m["body"] for m in got] == [f"h{i}" for i in range(1000, 1200)]
        assert other.receive("c", 300) is None
        hoarder.kill()
        back = receive_all(other, "c", 1000, timeout_ms=10000)
        assert {m["body"] for m in back} == {f"h{i}" for i in range(1000)}
    finally:
        hoarder.close()
        other.close()


def test_a_client_that_never_reads_gets_no_more_than_its_socket_holds(broker):
    """Prefetch 100,000 and a socket never read: dispatch stops once the broker's write buffer is
    over its mark (bounded memory), the messages stay on the queue, and other clients carry on."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
    from http_helpers import call, http_url

    sender = OwClient(port_of(broker))
    try:
        sender.connect()
        sender("session", "s", "false", "auto")
        sender("producer", "p", "s", "queue:raw.unread", "persistent")
        body = "x" * 30_000
        for _ in range(300):  # 9 MB
            sender("send", "p", "text", body)
        c = connected(broker)
        try:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            c.send(model.SessionInfo(command_id=2, session_id=model.SessionId("ID:raw-1", 1)))
            c.send(model.ConsumerInfo(command_id=3, response_required=True,
                                      consumer_id=model.ConsumerId("ID:raw-1", 1, 1),
                                      destination=model.Queue("raw.unread"), prefetch_size=100_000))
            base = http_url(broker)

            def delivering() -> int:
                rows = call(base, "GET", "/api/queues")[1]
                return next(r["delivering"] for r in rows if r["name"] == "raw.unread")

            deadline = time.monotonic() + 5
            seen = []
            while time.monotonic() < deadline:  # until the count settles (a bound, not a pause)
                seen.append(delivering())
                if len(seen) > 5 and seen[-1] == seen[-5] and seen[-1] > 0:
                    break
                time.sleep(0.2)
            assert 0 < seen[-1] < 200, seen  # ~1 MB of writes plus the socket buffers, not 300
            sender("consumer", "other", "s", "queue:raw.unread.bystander")
            sender("producer", "q", "s", "queue:raw.unread.bystander", "persistent")
            sender("send", "q", "text", "still-served")
            assert sender.receive("other")["body"] == "still-served"
        finally:
            c.close()
    finally:
        sender.close()
