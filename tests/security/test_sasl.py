"""Logins (issue 13, items 1, 4 and 5): SASL ANONYMOUS, PLAIN and SCRAM-SHA-256/512 run by
Hermod in front of Proton, and every way around authentication when anonymous logins are off:
a bare AMQP header, AMQP frames before the SASL outcome, a client that ignores a failed outcome.
Real broker processes, real sockets; python-qpid-proton for PLAIN, our own SCRAM client."""
from __future__ import annotations

import os
import stat
import time

import proton
import pytest
from hermod_testing import BrokerProcess, wait_for
from proton import ConnectionException, Message
from proton.utils import BlockingConnection

from hermod.broker.security.passwords import hash_password
from security_clients import (AMQP_HEADER, SASL_HEADER, EngineClient, FrameReader, connect, frame,
                              hermod, mechanisms, sasl_init, sasl_login)

ALICE_PW = "alice-Secret-42"


def secured(anonymous: bool = False, extra: str = "") -> str:
    return (f"[security]\nanonymous = {str(anonymous).lower()}\n"
            f"mechanisms = [\"SCRAM-SHA-512\", \"SCRAM-SHA-256\", \"PLAIN\"]\n{extra}"
            "[[security.user]]\nname = \"alice\"\n"
            f"password_hash = \"{hash_password(ALICE_PW)}\"\nroles = [\"admin\"]\n")


@pytest.fixture
def locked(start_broker):
    return start_broker(config=secured())


def plain(broker, user="alice", password=ALICE_PW, **kw) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=password, allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10, **kw)


def test_plain_login_with_proton_sends_and_receives(locked):
    conn = plain(locked)
    try:
        conn.create_sender("q.plain").send(Message(body="hello"))
        got = conn.create_receiver("q.plain").receive(timeout=10)
        assert got.body == "hello"
    finally:
        conn.close()


def test_plain_wrong_password_is_refused(locked):
    with pytest.raises(ConnectionException):
        plain(locked, password="wrong")
    with pytest.raises(ConnectionException):
        plain(locked, user="mallory")
    assert any("login failed for user 'alice'" in line for line in locked.stderr_lines)


def test_anonymous_is_not_offered_when_off(locked):
    sock = connect(locked.address)
    sock.sendall(SASL_HEADER)
    assert mechanisms(FrameReader(sock)) == ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
    sock.close()
    code, _ = sasl_login(connect(locked.address), "ANONYMOUS")
    assert code == 1
    with pytest.raises(ConnectionException):
        BlockingConnection(locked.url, allowed_mechs="ANONYMOUS", timeout=10)


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_then_amqp(locked, mech):
    sock = connect(locked.address)
    code, reader = sasl_login(sock, mech, "alice", ALICE_PW)
    assert code == 0
    client = EngineClient(sock, reader.buf)
    outcome = client.send("q.scram", "over scram")
    assert outcome == proton.Delivery.ACCEPTED
    sock.close()
    conn = plain(locked)
    try:
        assert conn.create_receiver("q.scram").receive(timeout=10).body == "over scram"
    finally:
        conn.close()


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_fail_alike(locked, mech):
    assert sasl_login(connect(locked.address), mech, "alice", "nope")[0] == 1
    assert sasl_login(connect(locked.address), mech, "nobody", "nope")[0] == 1


def test_bare_amqp_header_is_closed_unauthorized_before_any_attach(locked):
    """The bypass of the issue: skip SASL and pipeline open, begin and attach."""
    sock = connect(locked.address)
    sock.sendall(engine_opening_bytes())
    reader = FrameReader(sock)
    assert reader.header() == AMQP_HEADER
    frames = []
    while (f := reader.frame()) is not None:
        frames.append(f)
    codes = [code for _, code, _ in frames]
    assert codes == [0x10, 0x18], codes  # open, close: no begin, no attach
    error = frames[1][2][0]
    assert error.value[0] == "amqp:unauthorized-access"
    with pytest.raises(ConnectionException):
        BlockingConnection(locked.url, allowed_mechs="ANONYMOUS", sasl_enabled=False, timeout=10)


def test_amqp_frames_before_sasl_outcome_close_the_connection(locked):
    sock = connect(locked.address)
    sock.sendall(SASL_HEADER + engine_opening_bytes()[8:])  # an AMQP open where sasl-init belongs
    reader = FrameReader(sock)
    assert reader.header() == SASL_HEADER
    assert reader.frame()[1] == 0x40
    assert reader.rest() == b""
    assert wait_for_log(locked, "sent an AMQP frame before SASL ended")


def test_client_ignoring_a_failed_outcome_gets_nothing_more(locked):
    sock = connect(locked.address)
    sock.sendall(SASL_HEADER + sasl_init("PLAIN", b"\0alice\0wrong") + engine_opening_bytes())
    reader = FrameReader(sock)
    assert reader.header() == SASL_HEADER
    assert reader.frame()[1] == 0x40
    ftype, code, fields = reader.frame()
    assert (code, int(fields[0])) == (0x44, 1)
    assert reader.rest() == b""  # no AMQP header, no open: the attach never reached the broker


def test_a_refused_login_then_amqp_on_the_same_socket_is_not_served(locked):
    """A PLAIN init naming a mechanism that is not offered, then AMQP."""
    sock = connect(locked.address)
    sock.sendall(SASL_HEADER + sasl_init("ANONYMOUS", b"") + engine_opening_bytes())
    reader = FrameReader(sock)
    reader.header(), reader.frame()
    assert int(reader.frame()[2][0]) == 1
    assert reader.rest() == b""


def test_failed_logins_are_answered_later_and_later(locked):
    delays = []
    for _ in range(4):
        sock = connect(locked.address)
        started = time.monotonic()
        assert sasl_login(sock, "PLAIN", "alice", "wrong")[0] == 1
        delays.append(time.monotonic() - started)
        sock.close()
    assert delays[0] < delays[3] and delays[3] >= 0.7, delays
    # A good login still goes through (and resets the count).
    assert sasl_login(connect(locked.address), "PLAIN", "alice", ALICE_PW)[0] == 0


def test_anonymous_default_accepts_bare_header_and_sasl_anonymous(start_broker):
    b = start_broker()
    for kw in ({}, {"sasl_enabled": False}):
        conn = BlockingConnection(b.url, timeout=10, **kw)
        conn.create_sender("q.anon").send(Message(body="x"))
        conn.close()
    assert sasl_login(connect(b.address), "ANONYMOUS")[0] == 0


def test_user_cli_add_list_delete_and_the_password_is_written_nowhere(tmp_path, start_broker):
    cfg = tmp_path / "secure.toml"
    password = "pw-Never-Written-7"
    r = hermod("user", "add", "--config", str(cfg), "bob", "--password-stdin", "--role", "producer",
               "--role", "consumer", stdin=password + "\n")
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(cfg).st_mode) == 0o600  # the file Hermod created is the owner's
    cfg.write_text("[security]\nanonymous = false\n" + cfg.read_text())
    assert hermod("user", "add", "--config", str(cfg), "carol", "--password", "c-pw", "--role", "admin").returncode == 0
    listed = hermod("user", "list", "--config", str(cfg))
    assert listed.stdout.split() == ["bob", "producer,consumer", "carol", "admin"]
    assert hermod("user", "delete", "--config", str(cfg), "carol").returncode == 0
    assert hermod("user", "list", "--config", str(cfg)).stdout.split() == ["bob", "producer,consumer"]
    missing = hermod("user", "delete", "--config", str(cfg), "carol")
    assert missing.returncode == 2 and "carol" in missing.stderr

    data = tmp_path / "data"
    b = BrokerProcess(["--port", "0", "--config", str(cfg), "--data", str(data), "--log-level", "debug"],
                      tmp_path).start()
    try:
        conn = plain(b, user="bob", password=password)
        conn.create_sender("q.grep").send(Message(body="payload"))
        conn.close()
        with pytest.raises(ConnectionException):
            plain(b, user="bob", password=password + "-wrong")
    finally:
        b.stop()
    assert stat.S_IMODE(os.stat(data).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(data / "hermod.db").st_mode) == 0o600
    haystack = [cfg.read_bytes(), "".join(b.stderr_lines + b.stdout_lines).encode()]
    haystack += [p.read_bytes() for p in data.rglob("*") if p.is_file()]
    assert haystack[1].count(b"logged in as bob") == 1
    for blob in haystack:
        assert password.encode() not in blob


def test_mismatched_prompt_is_refused(tmp_path):
    """On a terminal the password is asked twice; a mismatch writes nothing."""
    import fcntl
    import pty
    import select
    import subprocess
    import sys
    import termios
    cfg = tmp_path / "p.toml"
    controller, terminal = pty.openpty()

    def own_terminal():  # the pty becomes the child's controlling terminal (/dev/tty)
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "user", "add", "--config", str(cfg), "dave",
                             "--role", "x"], stdin=terminal, stdout=terminal, stderr=subprocess.PIPE,
                            preexec_fn=own_terminal)
    os.close(terminal)
    try:
        for answer in (b"first-pw\n", b"second-pw\n"):
            out = b""
            deadline = time.monotonic() + 30
            while b": " not in out:
                assert time.monotonic() < deadline, f"no prompt, got {out!r}"
                if select.select([controller], [], [], 0.5)[0]:
                    out += os.read(controller, 1024)
            assert answer[:-1] not in out  # never echoed
            os.write(controller, answer)
        assert proc.wait(30) == 2
        assert b"do not match" in proc.stderr.read()
    finally:
        proc.kill()
        os.close(controller)
    assert not cfg.exists()


# -- helpers --------------------------------------------------------------------------------------

def engine_opening_bytes() -> bytes:
    """What a client that skips SASL sends: AMQP header, open, begin, attach (from Proton)."""
    conn = proton.Connection()
    conn.container = "bypass"
    t = proton.Transport()
    t.bind(conn)
    conn.open()
    s = conn.session()
    s.open()
    link = s.sender("bypass-link")
    link.target.address = "q.bypass"
    link.open()
    out = t.peek(t.pending())
    assert out.startswith(AMQP_HEADER)
    return out


def wait_for_log(broker, text: str) -> bool:
    return wait_for(lambda: any(text in line for line in broker.stderr_lines), message=text)


@pytest.mark.parametrize("opening, log_text", [
    (b"GET / HTTP/1.1\r\n\r\n", "an HTTP request"),  # the front door's answer: a 400 saying what the port speaks
    (SASL_HEADER + b"\x00\x10\x00\x00\x02\x01\x00\x00", "sent a malformed SASL frame (size 1048576)"),
    (SASL_HEADER + frame(1, 0x44, [0]), "out of turn"),
])
def test_hostile_openings_close_only_that_connection(locked, opening, log_text):
    sock = connect(locked.address)
    sock.sendall(opening)
    FrameReader(sock).rest()  # the broker closes it (after at most its own header and mechanisms)
    assert wait_for_log(locked, log_text)
    assert sasl_login(connect(locked.address), "PLAIN", "alice", ALICE_PW)[0] == 0


def test_a_pipelined_login_reaches_amqp(locked):
    """A client may send its AMQP header and frames right behind a correct sasl-init."""
    sock = connect(locked.address)
    sock.sendall(SASL_HEADER + sasl_init("PLAIN", f"\0alice\0{ALICE_PW}".encode()) + engine_opening_bytes())
    reader = FrameReader(sock)
    assert reader.header() == SASL_HEADER
    assert reader.frame()[1] == 0x40
    ftype, code, fields = reader.frame()
    assert (code, int(fields[0])) == (0x44, 0)
    assert reader.header() == AMQP_HEADER
    codes = [reader.frame()[1] for _ in range(3)]
    assert codes == [0x10, 0x11, 0x12]  # open, begin, attach: served
    sock.close()
