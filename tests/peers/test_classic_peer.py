"""The ActiveMQ Classic 5.17.2 peer itself (classic.py), driven by stomp.py: a private instance
starts on free ports, serves STOMP, OpenWire and MQTT, checks its users and authorization
entries, keeps persistent messages in its own KahaDB across a restart, and stops. Each test
starts a JVM (seconds), so they are few."""
from __future__ import annotations

import socket
import threading
import time

import stomp
from classic import AuthEntry, Security, accepts

USERS = {"alice": ("alice-pw", "users"), "admin": ("admin-pw", "admins,users")}


class Frames(stomp.ConnectionListener):
    """What the broker sent, with bounded waits."""

    def __init__(self) -> None:
        self.messages: list = []
        self.errors: list = []
        self.receipts: list[str] = []
        self.cond = threading.Condition()

    def _add(self, bucket: list, item) -> None:
        with self.cond:
            bucket.append(item)
            self.cond.notify_all()

    def on_message(self, frame) -> None:
        self._add(self.messages, frame)

    def on_error(self, frame) -> None:
        self._add(self.errors, frame)

    def on_receipt(self, frame) -> None:
        self._add(self.receipts, frame.headers["receipt-id"])

    def wait(self, what: str, n: int, timeout: float = 15) -> list:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(getattr(self, what)) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(getattr(self, what))} {what} of {n} in {timeout} s"
                self.cond.wait(left)
            return list(getattr(self, what))


def connect(port: int, login: str = "", passcode: str = "") -> tuple[stomp.Connection12, Frames]:
    conn = stomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0))
    frames = Frames()
    conn.set_listener("frames", frames)
    conn.connect(login, passcode, wait=True, headers={"host": "classic"})
    return conn, frames


def raw_connect(port: int, login: str, passcode: str) -> str:
    """CONNECT over a bare socket; the first frame the broker answers with."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(f"CONNECT\naccept-version:1.2\nhost:classic\nlogin:{login}\npasscode:{passcode}\n\n\0".encode())
        data = b""
        while b"\0" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\0")[0].decode(errors="replace")


def test_classic_serves_stomp_and_checks_users_and_authorization(start_classic):
    security = Security(USERS, [AuthEntry(">", "queue", read="admins", write="admins,users", admin="admins,users"),
                                AuthEntry("ActiveMQ.Advisory.>", "topic", read="users", write="users", admin="users")])
    classic = start_classic(persistent=False, security=security)
    assert all(accepts(p) for p in (classic.openwire_port, classic.stomp_port, classic.mqtt_port))

    conn, frames = connect(classic.stomp_port, "admin", "admin-pw")
    try:
        for body in ("one", "two", "three"):
            conn.send("/queue/peer.check", body, headers={"color": "red"}, receipt=f"r-{body}")
        assert frames.wait("receipts", 3) == ["r-one", "r-two", "r-three"]
        conn.subscribe("/queue/peer.check", id="s1", ack="client-individual")
        got = frames.wait("messages", 3)
        assert [f.body for f in got] == ["one", "two", "three"]
        assert all(f.headers["destination"] == "/queue/peer.check" and f.headers["color"] == "red" for f in got)
        for f in got:
            conn.ack(f.headers["message-id"], "s1")
    finally:
        conn.disconnect()

    refused = raw_connect(classic.stomp_port, "alice", "wrong")
    assert refused.startswith("ERROR"), refused
    assert "User name [alice] or password is invalid." in refused
    assert raw_connect(classic.stomp_port, "alice", "alice-pw").startswith("CONNECTED")

    # alice may write the queue but not read it: her SUBSCRIBE gets an ERROR naming the permission.
    conn, frames = connect(classic.stomp_port, "alice", "alice-pw")
    try:
        conn.send("/queue/peer.check", "from alice", receipt="r-alice")
        assert frames.wait("receipts", 1) == ["r-alice"]
        conn.subscribe("/queue/peer.check", id="s1")
        [error] = frames.wait("errors", 1)
        assert "is not authorized to read from: queue://peer.check" in error.headers["message"], error.headers
        assert frames.messages == []
    finally:
        conn.disconnect()


def test_classic_keeps_persistent_messages_in_its_kahadb_across_a_restart(start_classic):
    classic = start_classic(persistent=True, protocols=("stomp",))
    conn, frames = connect(classic.stomp_port)
    conn.send("/queue/peer.durable", "kept", headers={"persistent": "true"}, receipt="r1")
    conn.send("/queue/peer.durable", "lost", headers={"persistent": "false"}, receipt="r2")
    frames.wait("receipts", 2)
    conn.disconnect()
    port = classic.stomp_port
    classic.restart()
    assert classic.stomp_port == port
    conn, frames = connect(classic.stomp_port)
    try:
        conn.subscribe("/queue/peer.durable", id="s1", ack="auto")
        assert [f.body for f in frames.wait("messages", 1)] == ["kept"]
        conn.send("/queue/peer.durable", "marker", receipt="r3")
        assert [f.body for f in frames.wait("messages", 2)] == ["kept", "marker"]  # "lost" did not survive
    finally:
        conn.disconnect()
