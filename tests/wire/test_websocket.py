"""AMQP over WebSocket (issue 13's last item, issue 17 item 4): `[[listener]] websocket = true`,
the OASIS AMQP WebSocket Binding (subprotocol `amqp`, any path), `wss` with TLS, SASL as over TCP,
and hostile clients that close only their own connection. The clients here are Python (wsproto
client side + a Proton engine or raw SASL); rhea over WebSocket is in tests/interop."""
from __future__ import annotations

import shutil
import socket
import ssl
import sys
from pathlib import Path

import proton
import pytest
from proton.utils import BlockingConnection
from hermod_testing import wait_for

from ws_client import BINARY, CLOSE, CONTINUATION, PING, TEXT, WsRefused, WsSocket, read_close, ws_frame

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from certs import make_all  # noqa: E402
from security_clients import AMQP_HEADER, SASL_HEADER, EngineClient, FrameReader, mechanisms, sasl_login  # noqa: E402

from hermod.broker.security.passwords import hash_password  # noqa: E402

ALICE_PW = "ws-alice-pw"
USERS = (f'[[security.user]]\nname = "alice"\npassword_hash = "{hash_password(ALICE_PW, iterations=64)}"\n'
         'roles = ["admin"]\n')


def ws_listener(name: str = "web", max_frame_size: int = 4096, tls: bool = False) -> str:
    return (f'[[listener]]\nname = "{name}"\nhost = "127.0.0.1"\nport = 0\nwebsocket = true\n'
            f'max_frame_size = {max_frame_size}\ntls = {str(tls).lower()}\n')


def listener_url(broker, name: str = "web") -> str:
    line = next(l for l in broker.stdout_lines if l.startswith(f"hermod listener {name} on "))
    return line.split(" on ", 1)[1].strip()


def address_of(url: str) -> str:
    return url.split("://", 1)[1]


def logged(broker, text: str) -> bool:
    return wait_for(lambda: any(text in line for line in broker.stderr_lines), message=repr(text))


def raw_upgrade(address: str, path: str = "/", protocol: str | None = "amqp", timeout: float = 10) -> socket.socket:
    """A hand-made upgrade request; returns the socket once the 101 head is read."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    head = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
    if protocol is not None:
        head += f"Sec-WebSocket-Protocol: {protocol}\r\n"
    sock.sendall((head + "\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(1)
        assert chunk, f"closed during the upgrade: {answer!r}"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


def http_answer(sock: socket.socket) -> bytes:
    """Everything the broker sends until it closes the socket."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def round_trip(sock, address: str, body) -> None:
    """Send one message and take it back on a Proton engine running over `sock`."""
    client = EngineClient(sock)
    assert client.send(address, body) == proton.Delivery.ACCEPTED
    link = client.session.receiver("r-" + address)
    link.source.address = address
    link.open()
    link.flow(1)
    client.pump(lambda: link.current is not None and not link.current.partial)
    got = proton.Message()
    got.decode(link.recv(link.current.pending))
    assert got.body == body
    link.current.update(proton.Delivery.ACCEPTED)
    link.current.settle()
    return client


@pytest.fixture
def web(start_broker):
    return start_broker(config=ws_listener())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def tls_section(pki) -> str:
    return f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'


def client_tls(pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.check_hostname = False
    return ctx


# -- the happy paths ---------------------------------------------------------------------------

def test_readiness_line_and_round_trip_on_any_path(web):
    url = listener_url(web)
    assert url.startswith("ws://127.0.0.1:")
    assert web.stdout_lines[-1].startswith("hermod listening on amqp://")  # the main line last
    for i, path in enumerate(("/", "/amqp", "/some/deep/path?x=1")):
        sock = WsSocket.connect(address_of(url), path=path)
        assert sock.subprotocol == "amqp"
        round_trip(sock, f"q.ws{i}", f"over websocket at {path}")
        sock.close()
    # one broker behind both listeners: sent over WebSocket, taken over TCP
    sock = WsSocket.connect(address_of(url))
    assert EngineClient(sock).send("q.ws.tcp", "from ws") == proton.Delivery.ACCEPTED
    sock.close()
    conn = BlockingConnection(web.url, timeout=10)
    try:
        assert conn.create_receiver("q.ws.tcp").receive(timeout=10).body == "from ws"
    finally:
        conn.close()


def test_sasl_plain_over_wss_and_anonymous_refused(start_broker, pki):
    b = start_broker(config=ws_listener(tls=True) + tls_section(pki) + "[security]\nanonymous = false\n" + USERS)
    url = listener_url(b)
    assert url.startswith("wss://127.0.0.1:")
    sock = WsSocket.connect(address_of(url), tls=client_tls(pki))
    code, reader = sasl_login(sock, "PLAIN", "alice", ALICE_PW)
    assert code == 0
    client = EngineClient(sock, reader.buf)
    assert client.send("q.wss", "secret") == proton.Delivery.ACCEPTED
    sock.close()
    assert logged(b, "logged in as alice (PLAIN)")
    # ANONYMOUS is not offered; a client that skips SASL is refused before any attach.
    sock = WsSocket.connect(address_of(url), tls=client_tls(pki))
    sock.sendall(SASL_HEADER)
    assert "ANONYMOUS" not in mechanisms(FrameReader(sock))
    sock.close()
    sock = WsSocket.connect(address_of(url), tls=client_tls(pki))
    sock.sendall(AMQP_HEADER)
    reader = FrameReader(sock)
    assert reader.header() == AMQP_HEADER
    assert reader.frame()[1] == 0x10  # open
    ftype, code, fields = reader.frame()
    assert code == 0x18 and str(fields[0].value[0]) == "amqp:unauthorized-access"
    sock.close()


def test_max_connections_holds_across_websocket(start_broker):
    b = start_broker(config="[server]\nmax_connections = 1\n" + ws_listener())
    first = WsSocket.connect(address_of(listener_url(b)))
    round_trip(first, "q.limit", "one")
    second = WsSocket.connect(address_of(listener_url(b)))
    client = EngineClient(second)
    client.pump(lambda: client.conn.state & proton.Endpoint.REMOTE_CLOSED)
    assert client.conn.remote_condition.name == "amqp:resource-limit-exceeded"
    first.close()
    second.close()


def test_fragmented_messages_ping_and_close_handshake(web):
    """The AMQP header split over a fragmented message (continuation frames), a ping answered
    with a pong carrying its payload, and a client close answered with a close frame."""
    sock = raw_upgrade(address_of(listener_url(web)))
    sock.sendall(ws_frame(BINARY, AMQP_HEADER[:3], fin=False) + ws_frame(PING, b"are you there")
                 + ws_frame(CONTINUATION, AMQP_HEADER[3:5], fin=False) + ws_frame(CONTINUATION, AMQP_HEADER[5:]))
    buf = b""
    while len(buf) < 2 + 13 or buf[0] != 0x8A:  # the pong comes first: nothing else is due yet
        buf += sock.recv(65536)
    assert buf[:15] == bytes([0x8A, 13]) + b"are you there"
    # open arrives in binary frames; then our close is answered with the broker's.
    conn = proton.Connection()
    transport = proton.Transport()
    transport.bind(conn)
    conn.open()
    out = transport.peek(transport.pending())
    sock.sendall(ws_frame(BINARY, out[8:]))  # the header went already
    sock.sendall(ws_frame(CLOSE, (1000).to_bytes(2, "big") + b"bye"))
    # The broker's header may have come in the same read as the pong: hand those bytes on.
    code, data = read_close(sock, already=buf[15:])
    assert code == 1000
    assert data.startswith(AMQP_HEADER)
    assert sock.recv(1) == b""  # and the socket ends
    sock.close()


def test_broker_sends_a_close_frame_after_the_amqp_close(web):
    sock = WsSocket.connect(address_of(listener_url(web)))
    client = round_trip(sock, "q.bye", "x")
    client.conn.close()
    client.pump(lambda: client.conn.state & proton.Endpoint.REMOTE_CLOSED)
    wait_for(lambda: sock.recv(65536) == b"" and sock.closed_by_peer is not None, message="close frame")
    assert sock.closed_by_peer.code == 1000
    sock.raw.close()


# -- hostile clients ---------------------------------------------------------------------------

def assert_still_serves(broker) -> None:
    sock = WsSocket.connect(address_of(listener_url(broker)))
    round_trip(sock, "q.alive", "still here")
    sock.close()


@pytest.mark.parametrize("protocols", [(), ("xmpp",), ("amqp-ish", "wamp")])
def test_upgrade_without_a_served_subprotocol_is_refused(web, protocols):
    with pytest.raises(WsRefused) as refused:
        WsSocket.connect(address_of(listener_url(web)), subprotocols=protocols)
    assert refused.value.status == 400
    assert b"amqp" in refused.value.body
    assert logged(web, "offers no subprotocol this listener speaks")
    assert_still_serves(web)


@pytest.mark.parametrize("request_bytes", [
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # a plain HTTP request: no upgrade
    b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Protocol: amqp\r\n\r\n",  # no key, no version
    b"AMQP\x00\x01\x00\x00",  # plain AMQP on a WebSocket port
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",  # TLS on a ws:// port
])
def test_bad_upgrade_gets_a_400_class_answer_and_is_closed(web, request_bytes):
    host, port = address_of(listener_url(web)).rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(request_bytes)
    answer = http_answer(sock)
    assert answer.startswith(b"HTTP/1.1 4"), answer
    sock.close()
    assert logged(web, "websocket connection from 127.0.0.1")
    assert_still_serves(web)


def test_unmasked_client_frame_closes_with_protocol_error(web):
    sock = raw_upgrade(address_of(listener_url(web)))
    sock.sendall(ws_frame(BINARY, AMQP_HEADER, masked=False))
    code, data = read_close(sock)
    assert code == 1002 and data == b""  # nothing reached AMQP
    assert logged(web, "unmasked")
    sock.close()
    assert_still_serves(web)


def test_text_frame_closes_with_unsupported_data(web):
    sock = raw_upgrade(address_of(listener_url(web)))
    sock.sendall(ws_frame(TEXT, b"AMQP"))
    code, _ = read_close(sock)
    assert code == 1003
    assert logged(web, "text frame")
    sock.close()
    assert_still_serves(web)


def test_one_megabyte_frame_on_a_small_listener_is_closed_early(start_broker):
    b = start_broker(config=ws_listener(max_frame_size=512))
    sock = raw_upgrade(address_of(listener_url(b)))
    # The header announces 1 MB: the broker closes on the header, before reading the payload,
    # so nothing of it reaches AMQP (no AMQP header comes back).
    sock.sendall(ws_frame(BINARY, AMQP_HEADER + b"\x00" * 1000, length=1024 * 1024))
    code, data = read_close(sock)
    assert (code, data) == (1009, b"")
    assert logged(b, "frame of 1048576 bytes over 66048 (max_frame_size 512 plus 65536)")
    sock.close()
    assert_still_serves(b)


def test_client_that_vanishes_mid_handshake(web):
    host, port = address_of(listener_url(web)).rsplit(":", 1)
    for cut in (5, 40, 120):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"GET /amqp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"[:cut])
        sock.close()
    assert_still_serves(web)
    assert not any("Traceback" in line for line in web.stderr_lines)


def test_slowloris_upgrade_head_is_dropped_after_the_handshake_deadline(start_broker):
    b = start_broker(config="[server]\nidle_timeout_s = 1\n" + ws_listener())
    host, port = address_of(listener_url(b)).rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and then a byte now and then, never the end
    sock.settimeout(5)
    ended = False
    for _ in range(200):
        try:
            sock.sendall(b"X")
            sock.settimeout(0.05)
            if sock.recv(1) == b"":
                ended = True
                break
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            ended = True
            break
    assert ended, "the broker kept a half-sent upgrade head for over 10 s"
    assert logged(b, "did not complete its upgrade in time")
    sock.close()


def test_upgrade_head_over_16_kib_is_refused(web):
    host, port = address_of(listener_url(web)).rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    try:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * (20 * 1024) + b"\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = http_answer(sock)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert logged(web, "upgrade request head over 16384 bytes")
    sock.close()
    assert_still_serves(web)


def test_heartbeats_flow_over_websocket(start_broker):
    """A client that advertises an idle timeout gets empty frames from the broker inside it,
    carried in binary WebSocket messages like every other byte."""
    b = start_broker(config=ws_listener())
    sock = WsSocket.connect(address_of(listener_url(b)))
    client = EngineClient(sock)
    client.transport.idle_timeout = 1.0
    client.pump(lambda: client.conn.state & proton.Endpoint.REMOTE_ACTIVE)
    before = client.transport.frames_input
    client.pump(lambda: client.transport.frames_input >= before + 2, timeout=3)
    sock.close()


def test_graceful_stop_closes_websocket_clients_with_amqp_and_websocket_close(start_broker):
    b = start_broker(config=ws_listener())
    sock = WsSocket.connect(address_of(listener_url(b)))
    client = round_trip(sock, "q.stop", "before stop")
    assert b.stop() == 0
    client.pump(lambda: client.conn.state & proton.Endpoint.REMOTE_CLOSED)
    assert client.conn.remote_condition.name == "amqp:connection:forced"
    wait_for(lambda: sock.recv(65536) == b"", message="end of stream")
    assert sock.closed_by_peer is not None and sock.closed_by_peer.code == 1000
    sock.raw.close()
