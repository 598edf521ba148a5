"""Issue 28 ("also from reading"): sockets in a TLS handshake or before a WebSocket upgrade did not
count toward `max_connections`, and a handshake that never finished held its socket for 30 s (TLS)
or the idle timeout (WebSocket). Contract ("Operations", "Delivery guarantees and limits"): every
socket the broker holds for a client counts, from accept to close; a connection over the limit is
closed with `amqp:resource-limit-exceeded`. Hermod lets a socket over the limit through its TLS
handshake / upgrade to say so in an AMQP close (up to the limit plus max(limit, 1024) sockets:
past that it closes at accept), and bounds the TLS handshake and the upgrade by HANDSHAKE_DEADLINE_S (5 s)."""
from __future__ import annotations

import shutil
import socket
import ssl
import sys
import time
from pathlib import Path

import proton
import pytest

from hermod_testing import wait_for

TESTS = Path(__file__).resolve().parents[1]
for extra in (TESTS / "security", TESTS / "wire"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
from certs import make_all  # noqa: E402
from security_clients import EngineClient  # noqa: E402
from ws_client import WsSocket  # noqa: E402

LIMIT = 4
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
DEADLINE_BOUND_S = 10.0  # the broker's handshake deadline is 5 s; generous for a loaded machine


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def listener_address(broker, name: str) -> tuple[str, int]:
    line = next(l for l in broker.stdout_lines if l.startswith(f"hermod listener {name} on "))
    host, port = line.split("://", 1)[1].strip().rsplit(":", 1)
    return host, int(port)


def tls_broker(start_broker, pki, limit: int = LIMIT):
    return start_broker(config=(
        f"[server]\nmax_connections = {limit}\n"
        '[[listener]]\nname = "secure"\nhost = "127.0.0.1"\nport = 0\ntls = true\n'
        f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'))


def ws_broker(start_broker, limit: int = LIMIT):
    return start_broker(config=(
        f"[server]\nmax_connections = {limit}\n"
        '[[listener]]\nname = "web"\nhost = "127.0.0.1"\nport = 0\nwebsocket = true\n'))


def tls_socket(pki, address: tuple[str, int]) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.check_hostname = False
    return ctx.wrap_socket(socket.create_connection(address, timeout=10), server_hostname=address[0])


def amqp_outcome(sock) -> str:
    """Open an AMQP connection (no SASL: anonymous) over `sock` and send one message: 'served',
    or the condition the broker closed the connection with."""
    client = EngineClient(sock)
    client.pump(lambda: client.conn.state & (proton.Endpoint.REMOTE_ACTIVE | proton.Endpoint.REMOTE_CLOSED))
    client.pump(lambda: client.conn.state & proton.Endpoint.REMOTE_CLOSED or client.session.state
                & proton.Endpoint.REMOTE_ACTIVE)
    if client.conn.state & proton.Endpoint.REMOTE_CLOSED:
        return client.conn.remote_condition.name if client.conn.remote_condition else "closed without a condition"
    outcome = client.send("limits.handshake", "through")
    return "served" if outcome == proton.Delivery.ACCEPTED else f"send: {outcome}"


def stall(address: tuple[str, int], count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    """Sockets that connect (and send `first_bytes`, if any) and then never finish their handshake."""
    out = []
    for _ in range(count):
        s = socket.create_connection(address, timeout=10)
        if first_bytes:
            s.sendall(first_bytes)
        out.append(s)
    return out


def plain_outcome(broker) -> str:
    host, port = broker.address.rsplit(":", 1)
    return amqp_outcome(socket.create_connection((host, int(port)), timeout=10))


def served_again(outcome) -> bool:
    try:
        return outcome() == "served"
    except (AssertionError, OSError):
        return False


def closed_by_broker(s: socket.socket, within: float) -> float | None:
    """Seconds until the broker closed `s` (None: still open after `within`)."""
    start = time.monotonic()
    s.settimeout(0.2)
    while time.monotonic() - start < within:
        try:
            if s.recv(4096) == b"":
                return time.monotonic() - start
        except socket.timeout:
            continue
        except OSError:
            return time.monotonic() - start
    return None


def test_sockets_in_a_tls_handshake_count_toward_max_connections(start_broker, pki):
    b = tls_broker(start_broker, pki)
    address = listener_address(b, "secure")
    stalled = stall(address, LIMIT)  # TCP accepted, never a ClientHello
    try:
        assert amqp_outcome(tls_socket(pki, address)) == RESOURCE_LIMIT
        assert plain_outcome(b) == RESOURCE_LIMIT  # the limit is the broker's, across listeners
        assert any("max_connections" in line for line in b.stderr_lines)
    finally:
        for s in stalled:
            s.close()
    wait_for(lambda: served_again(lambda: amqp_outcome(tls_socket(pki, address))),
             message="a TLS client served once the stalled handshakes closed")
    assert plain_outcome(b) == "served"


def test_sockets_before_a_websocket_upgrade_count_toward_max_connections(start_broker):
    b = ws_broker(start_broker)
    address = listener_address(b, "web")
    where = f"{address[0]}:{address[1]}"
    # Half of them silent, half in the middle of their upgrade head.
    stalled = stall(address, LIMIT // 2) + stall(address, LIMIT - LIMIT // 2, b"GET / HTTP/1.1\r\nHost: x\r\n")
    try:
        assert amqp_outcome(WsSocket.connect(where)) == RESOURCE_LIMIT
        assert plain_outcome(b) == RESOURCE_LIMIT
    finally:
        for s in stalled:
            s.close()
    wait_for(lambda: served_again(lambda: amqp_outcome(WsSocket.connect(where))),
             message="a WebSocket client served once the stalled upgrades closed")
    assert plain_outcome(b) == "served"


@pytest.mark.parametrize("kind", ["tls", "websocket"])
def test_a_handshake_that_never_finishes_is_closed_in_bounded_time_and_frees_its_place(start_broker, pki, kind):
    """Nobody closes the stalled sockets here: the broker's handshake deadline must."""
    b = tls_broker(start_broker, pki) if kind == "tls" else ws_broker(start_broker)
    address = listener_address(b, "secure" if kind == "tls" else "web")
    stalled = stall(address, LIMIT)
    try:
        assert plain_outcome(b) == RESOURCE_LIMIT
        took = [closed_by_broker(s, DEADLINE_BOUND_S) for s in stalled]
        assert all(t is not None for t in took), f"stalled {kind} handshakes still open after {DEADLINE_BOUND_S} s"
        wait_for(lambda: served_again(lambda: plain_outcome(b)), message="served once the deadline freed them")
    finally:
        for s in stalled:
            s.close()


def test_past_the_overflow_sockets_are_closed_at_accept(start_broker, pki):
    """Sockets over the limit are let through to hear the AMQP refusal, but not without bound:
    the limit plus max(limit, 1024) are held, one more is closed at once."""
    b = tls_broker(start_broker, pki)
    address = listener_address(b, "secure")
    held = LIMIT + max(LIMIT, 1024)
    stalled = stall(address, held)
    try:
        late = socket.create_connection(address, timeout=10)
        assert closed_by_broker(late, 4.0) is not None, f"socket {held + 1} was kept"
        late.close()
        assert all(closed_by_broker(s, 0.05) is None for s in stalled[-LIMIT:])  # those still wait
        assert any("closed at accept" in line for line in b.stderr_lines)
    finally:
        for s in stalled:
            s.close()
    wait_for(lambda: served_again(lambda: plain_outcome(b)), message="served once they closed")
