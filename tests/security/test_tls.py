"""TLS (issue 13, items 1 and 2): [server] tls and [[listener]] entries, [tls] with client
certificates, SASL EXTERNAL as the certificate's CN, and failures that close only their own
connection with a log line. Certificates are made per session with `openssl` (never committed)."""
from __future__ import annotations

import shutil
import signal
import socket
import ssl

import pytest
from hermod_testing import wait_for
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection

from hermod.broker.security.passwords import hash_password
from certs import make_all
from security_clients import FrameReader, SASL_HEADER, mechanisms

ALICE_PW = "tls-alice-pw"
USERS = (f'[[security.user]]\nname = "alice"\npassword_hash = "{hash_password(ALICE_PW, iterations=64)}"\n'
         'roles = ["admin"]\n'
         f'[[security.user]]\nname = "bob"\npassword_hash = "{hash_password("bob-pw", iterations=64)}"\n'
         'roles = ["admin"]\n')


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def tls_section(pki, client_certificates="none") -> str:
    return (f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\nca = "{pki / "ca.crt"}"\n'
            f'client_certificates = "{client_certificates}"\n')


def domain(pki, cert: str | None = None) -> SSLDomain:
    d = SSLDomain(SSLDomain.MODE_CLIENT)
    d.set_trusted_ca_db(str(pki / "ca.crt"))
    d.set_peer_authentication(SSLDomain.VERIFY_PEER)
    if cert is not None:
        d.set_credentials(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"), None)
    return d


def tls_socket(pki, address: str, cert: str | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    host, port = address.rsplit(":", 1)
    return ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10))


def logged(broker, text: str) -> bool:
    return wait_for(lambda: any(text in line for line in broker.stderr_lines), message=text)


def test_tls_main_listener_plain_login(start_broker, pki):
    b = start_broker(config="[server]\ntls = true\n" + tls_section(pki)
                     + "[security]\nanonymous = false\n" + USERS)
    assert b.url.startswith("amqps://")
    conn = BlockingConnection(b.url, ssl_domain=domain(pki), user="alice", password=ALICE_PW,
                              allowed_mechs="PLAIN", timeout=10)
    try:
        conn.create_sender("q.tls").send(Message(body="secret"))
        assert conn.create_receiver("q.tls").receive(timeout=10).body == "secret"
    finally:
        conn.close()


def test_plain_amqp_and_aborted_handshakes_close_only_that_connection(start_broker, pki):
    b = start_broker(config="[server]\ntls = true\n" + tls_section(pki))
    host, port = b.address.rsplit(":", 1)
    good = BlockingConnection(b.url, ssl_domain=domain(pki), timeout=10)
    try:
        plain = socket.create_connection((host, int(port)), timeout=10)
        plain.sendall(b"AMQP\x00\x01\x00\x00")
        try:  # a TLS alert at most, then the end of the stream: never an AMQP answer
            received = b""
            while chunk := plain.recv(4096):
                received += chunk
            assert not received.startswith(b"AMQP")
        except ConnectionResetError:
            pass
        assert logged(b, "TLS handshake with 127.0.0.1")
        aborted = socket.create_connection((host, int(port)), timeout=10)
        aborted.close()
        wait_for(lambda: sum("TLS handshake with" in l for l in b.stderr_lines) >= 2, message="second log line")
        # The established connection carries on.
        good.create_sender("q.still").send(Message(body="fine"))
        assert good.create_receiver("q.still").receive(timeout=10).body == "fine"
    finally:
        good.close()


@pytest.fixture
def mutual(start_broker, pki):
    config = ("[[listener]]\nname = \"secure\"\nhost = \"127.0.0.1\"\nport = 0\ntls = true\n"
              "mechanisms = [\"PLAIN\"]\n" + tls_section(pki, "required")
              + "[security]\nanonymous = false\n" + USERS)
    return start_broker(config=config)


def secure_url(broker) -> str:
    line = next(l for l in broker.stdout_lines if l.startswith("hermod listener secure on "))
    return line.split(" on ", 1)[1].strip()


def test_listener_readiness_lines_come_before_the_main_one(mutual):
    lines = [line.strip() for line in mutual.stdout_lines]
    assert lines[0].startswith("hermod listener secure on amqps://127.0.0.1:")
    assert lines[-1].startswith("hermod listening on amqp://")  # the main line comes last
    assert [line.split(" on ")[0] for line in lines] == ["hermod listener secure", "hermod http",
                                                         "hermod listening"]


def test_external_login_with_a_verified_client_certificate(mutual, pki):
    url = secure_url(mutual)
    sock = tls_socket(pki, url.split("://")[1], cert="alice")
    sock.sendall(SASL_HEADER)
    assert mechanisms(FrameReader(sock)) == ["EXTERNAL", "PLAIN"]  # the listener's list + EXTERNAL
    sock.close()
    conn = BlockingConnection(url, ssl_domain=domain(pki, "alice"), allowed_mechs="EXTERNAL", timeout=10)
    try:
        conn.create_sender("q.ext").send(Message(body="by certificate"))
    finally:
        conn.close()
    assert logged(mutual, "logged in as alice (EXTERNAL)")


def test_certificate_of_no_user_is_refused(mutual, pki):
    with pytest.raises(ConnectionException):
        BlockingConnection(secure_url(mutual), ssl_domain=domain(pki, "mallory"), allowed_mechs="EXTERNAL",
                           timeout=10)
    assert logged(mutual, "no user named by the certificate's CN")


@pytest.mark.parametrize("cert", [None, "rogue"])
def test_missing_or_unverified_client_certificate_fails_the_handshake(mutual, pki, cert):
    with pytest.raises(Exception):
        BlockingConnection(secure_url(mutual), ssl_domain=domain(pki, cert), user="alice", password=ALICE_PW,
                           allowed_mechs="PLAIN", timeout=10)
    assert logged(mutual, "TLS handshake with 127.0.0.1")
    # The main (plain) listener is unaffected.
    conn = BlockingConnection(mutual.url, user="bob", password="bob-pw", allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)
    conn.close()


def test_sighup_reloads_the_certificate_without_dropping_connections(start_broker, pki, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    for name in ("server.crt", "server.key", "ca.crt"):
        shutil.copy(pki / name, live / name)
    # Relative paths resolve against the config file's directory.
    b = start_broker(config='[server]\ntls = true\n[tls]\ncert = "live/server.crt"\nkey = "live/server.key"\n')
    before = tls_socket(pki, b.address).getpeercert()["serialNumber"]
    held = BlockingConnection(b.url, ssl_domain=domain(pki), timeout=10)
    try:
        shutil.copy(pki / "server2.crt", live / "server.crt")
        shutil.copy(pki / "server2.key", live / "server.key")
        b.proc.send_signal(signal.SIGHUP)
        assert logged(b, "TLS certificate reloaded")
        after = tls_socket(pki, b.address).getpeercert()["serialNumber"]
        assert after != before
        held.create_sender("q.held").send(Message(body="still here"))
    finally:
        held.close()


def test_perf_tool_speaks_amqps(start_broker, pki):
    """`hermod perf --url amqps://...` (how the TLS cost on Q1 is measured)."""
    import subprocess
    import sys
    b = start_broker(config="[server]\ntls = true\n" + tls_section(pki))
    r = subprocess.run([sys.executable, "-m", "hermod.broker", "perf", "--url", b.url, "--mode", "throughput",
                        "--count", "500", "--size", "64", "--address", "q.perf"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "msgs=500 sent=500 received=500" in r.stdout


def test_cli_verifies_the_broker_with_ca_option(start_broker, pki):
    """Issue 33, finding 6: the CLI had no CA option. With `--ca` the broker's certificate is
    verified (host name too); without it an unknown CA is one clear line, exit 2."""
    import subprocess
    import sys
    b = start_broker(config="[server]\ntls = true\n" + tls_section(pki))
    url = b.url.replace("amqps://127.0.0.1", "amqps://localhost")

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "hermod.broker", "queue", "stat", "--url", url, *extra],
                              capture_output=True, text=True, timeout=60)
    ok = run("--ca", str(pki / "ca.crt"))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split()[0] == "address"
    other = run("--ca", str(pki / "otherca.crt"))
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1, other.stderr


def test_a_reload_that_removes_a_ca_closes_its_clients_and_refuses_the_next(start_broker, pki, tmp_path):
    """Issue 28, finding 9: after a CA leaves `[tls] ca` and SIGHUP, its client certificates no
    longer log in (the running context only ever added CAs), and connections already open with
    one are closed; a client of the CA that stays carries on."""
    bundle = tmp_path / "clients-ca.pem"
    bundle.write_text((pki / "ca.crt").read_text() + (pki / "otherca.crt").read_text())
    users = USERS.replace('"bob"', '"rogue-user"')  # the rogue certificate's CN is alice too
    config = ("[[listener]]\nname = \"secure\"\nhost = \"127.0.0.1\"\nport = 0\ntls = true\n"
              "mechanisms = [\"PLAIN\"]\n"
              + tls_section(pki, "required").replace(str(pki / "ca.crt"), str(bundle))
              + "[security]\nanonymous = false\n" + users)
    b = start_broker(config=config)
    url = secure_url(b)
    trusted = BlockingConnection(url, ssl_domain=domain(pki, "alice"), allowed_mechs="EXTERNAL", timeout=10)
    revoked = BlockingConnection(url, ssl_domain=domain(pki, "rogue"), allowed_mechs="EXTERNAL", timeout=10)
    try:
        revoked.create_sender("q.ca", name="from-rogue").send(Message(body="before"))
        bundle.write_text((pki / "ca.crt").read_text())  # otherca is taken out
        b.proc.send_signal(signal.SIGHUP)
        assert logged(b, "configuration reloaded")
        with pytest.raises(ConnectionException) as closed:
            sender = revoked.create_sender("q.ca", name="after-reload")
            for _ in range(100):
                sender.send(Message(body="after"))
        assert getattr(closed.value, "condition", None) == "amqp:unauthorized-access", str(closed.value)
        assert logged(b, "no longer verifies")
        with pytest.raises(Exception):  # noqa: B017 - the handshake itself fails now
            BlockingConnection(url, ssl_domain=domain(pki, "rogue"), allowed_mechs="EXTERNAL", timeout=10)
        # The client of the CA that stays is not touched, and a new one still logs in.
        trusted.create_sender("q.ca", name="from-alice").send(Message(body="still here"))
        again = BlockingConnection(url, ssl_domain=domain(pki, "alice"), allowed_mechs="EXTERNAL", timeout=10)
        receiver = again.create_receiver("q.ca")
        assert [receiver.receive(timeout=10).body for _ in range(2)] == ["before", "still here"]
        receiver.accept()
        again.close()
    finally:
        trusted.close()
        try:
            revoked.close()
        except Exception:  # noqa: BLE001 - closed by the broker
            pass
