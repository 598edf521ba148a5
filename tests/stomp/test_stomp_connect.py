"""CONNECT / STOMP, versions, login, heart-beats, receipts and DISCONNECT against a real broker,
with stomp.py and a raw socket client."""
from __future__ import annotations

import time

import pytest
import stomp
from stomp_clients import Raw, connect

from hermod.broker.security.passwords import hash_password

USERS = f"""
[security]
anonymous = false
  [[security.user]]
  name = "alice"
  password_hash = "{hash_password('wonderland', iterations=64)}"
  roles = ["admin"]
"""


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_each_version_connects_and_disconnects_with_a_receipt(broker, version):
    raw = Raw(broker)
    connected = raw.connect(version)
    assert connected.command == "CONNECTED" and connected.header("version") == version
    assert connected.header("session")
    raw.frame("DISCONNECT", [("receipt", "bye-1")], version=version)
    receipt = raw.next()
    assert receipt.command == "RECEIPT" and receipt.header("receipt-id") == "bye-1"
    assert raw.closed_by_broker()


def test_the_highest_common_version_wins_and_an_unknown_one_is_an_error(broker):
    raw = Raw(broker)
    raw.send(b"STOMP\naccept-version:1.0,1.1,1.2,1.9\nhost:/\n\n\x00")
    assert raw.next().header("version") == "1.2"
    raw = Raw(broker)
    raw.send(b"CONNECT\naccept-version:2.0,3.1\nhost:/\n\n\x00")
    error = raw.next()
    assert error.command == "ERROR" and "1.2" in error.header("version") and error.header("message")
    assert raw.closed_by_broker()


def test_stomp_py_connects_in_every_version(broker):
    for version in ("1.0", "1.1", "1.2"):
        conn, _ = connect(broker, version)
        assert conn.is_connected()
        conn.disconnect()


def test_login_checked_against_the_users(start_broker):
    broker = start_broker(config=USERS)
    good = Raw(broker)
    assert good.connect("1.2", "alice", "wonderland").command == "CONNECTED"
    bad = Raw(broker)
    error = bad.connect("1.2", "alice", "nope")
    assert error.command == "ERROR" and "login" in error.header("message")
    assert bad.closed_by_broker()
    anonymous = Raw(broker)
    assert anonymous.connect("1.2").command == "ERROR"
    assert anonymous.closed_by_broker()
    with pytest.raises(stomp.exception.ConnectFailedException):
        connect(broker, "1.2", "alice", "wrong")
    conn, _ = connect(broker, "1.2", "alice", "wonderland")
    assert conn.is_connected()
    conn.disconnect()


def test_a_receipt_answers_every_frame(broker):
    raw = Raw(broker)
    raw.connect("1.2")
    raw.frame("SUBSCRIBE", [("destination", "/queue/rcpt"), ("id", "s1"), ("receipt", "r-sub")])
    raw.frame("BEGIN", [("transaction", "t1"), ("receipt", "r-begin")])
    raw.frame("SEND", [("destination", "/queue/other"), ("transaction", "t1"), ("receipt", "r-send")], b"x")
    raw.frame("ABORT", [("transaction", "t1"), ("receipt", "r-abort")])
    raw.frame("UNSUBSCRIBE", [("id", "s1"), ("receipt", "r-unsub")])
    seen = [raw.until("RECEIPT").header("receipt-id") for _ in range(5)]
    assert seen == ["r-sub", "r-begin", "r-send", "r-abort", "r-unsub"]


def test_heart_beats_both_ways(broker):
    raw = Raw(broker)
    connected = raw.connect("1.2", extra=[("heart-beat", "1000,1000")])
    send_ms, receive_ms = (int(x) for x in connected.header("heart-beat").split(","))
    assert send_ms == 1000 and receive_ms == 1000
    deadline = time.monotonic() + 10
    while raw.beats < 2 and time.monotonic() < deadline:  # the broker beats, and we keep it alive
        raw.send(b"\n")
        raw.sock.settimeout(0.5)
        try:
            raw._read()
        except OSError:
            pass
    assert raw.beats >= 2
    raw.frame("DISCONNECT", [("receipt", "still-here")])
    assert raw.until("RECEIPT").header("receipt-id") == "still-here"


def test_a_client_whose_heart_beats_stop_is_dropped(broker):
    raw = Raw(broker)
    connected = raw.connect("1.2", extra=[("heart-beat", "1000,0")])
    assert connected.header("heart-beat") == "0,1000"
    started = time.monotonic()
    error = raw.until("ERROR", timeout=10)
    assert "heart-beat" in error.header("message")
    assert raw.closed_by_broker()
    assert time.monotonic() - started >= 1.5
    other = Raw(broker)  # the broker carries on
    assert other.connect("1.2").command == "CONNECTED"


def test_frames_before_connect_are_refused(broker):
    raw = Raw(broker)
    raw.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00SEND\ndestination:/queue/x\n\nhi\x00")
    assert raw.next().command == "CONNECTED"
    raw2 = Raw(broker)
    raw2.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00CONNECT\naccept-version:1.2\n\n\x00")
    assert raw2.next().command == "CONNECTED"
    assert raw2.next().command == "ERROR"
    assert raw2.closed_by_broker()


def test_management_lists_and_closes_a_stomp_connection(broker):
    import json
    import re
    import urllib.request
    base = next(m.group(1) for line in broker.stdout_lines if (m := re.search(r"hermod http on (\S+)", line)))
    raw = Raw(broker)
    raw.connect("1.2", extra=[("client-id", "listed")])
    raw.frame("SUBSCRIBE", [("destination", "/queue/listed"), ("id", "s1"), ("selector", "a = 1"), ("receipt", "r")])
    raw.until("RECEIPT")
    with urllib.request.urlopen(base + "/api/connections") as answer:
        connections = json.load(answer)
    mine = next(c for c in connections if c["protocol"] == "stomp" and c["container_id"] == "listed")
    assert [(link["name"], link["role"], link["address"], link["filter"]) for link in mine["links"]] == [
        ("s1", "receiver", "listed::listed", "a = 1")]
    request = urllib.request.Request(f"{base}/api/connections/{mine['id']}", method="DELETE",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 204
    assert "closed by management" in raw.until("ERROR").header("message")
    assert raw.closed_by_broker()
