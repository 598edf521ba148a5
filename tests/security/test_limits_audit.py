"""Limits and accountability (issue 13, items 4 and 6): connections per user, the JSON-lines
audit log (owner-only, no passwords), and properties.user-id validated against the login."""
from __future__ import annotations

import json
import os
import stat

import proton
import pytest
from hermod_testing import wait_for
from proton import ConnectionException, Message
from proton.utils import BlockingConnection

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import management_call
from security_clients import engine_login

PW = "limit-pw-9"


def config(extra: str) -> str:
    return (f"[security]\nanonymous = false\n{extra}"
            f'[[security.user]]\nname = "alice"\npassword_hash = "{hash_password(PW, iterations=64)}"\n'
            'roles = ["admin"]\n'
            '[[security.permission]]\nmatch = "#"\nsend = ["admin"]\nconsume = ["admin"]\n'
            'create_address = ["admin"]\ncreate_durable_queue = ["admin"]\nmanage = ["admin"]\n'
            '[[security.permission]]\nmatch = "forbidden"\n')


def login(b, password=PW) -> BlockingConnection:
    return BlockingConnection(b.url, user="alice", password=password, allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)


def test_connections_per_user_are_limited(start_broker):
    b = start_broker(config=config("max_connections_per_user = 2\n"))
    first, second = login(b), login(b)
    with pytest.raises(ConnectionException):
        login(b)
    # The refusal reaches the client before the broker's log line may have been read.
    wait_for(lambda: any("user alice is at its connection limit (2)" in l for l in b.stderr_lines),
             message="the connection-limit log line")
    first.close()
    third = wait_for(lambda: _try_login(b), message="a slot freed by the closed connection")
    third.close()
    second.close()


def _try_login(b):
    try:
        return login(b)
    except ConnectionException:
        return None


def test_audit_log_records_logins_denials_and_management(start_broker, tmp_path):
    b = start_broker(config=config('audit_log = "audit.jsonl"\n'))
    conn = login(b)
    try:
        with pytest.raises(proton.utils.LinkDetached):
            conn.create_sender("forbidden")
    finally:
        conn.close()
    with pytest.raises(ConnectionException):
        login(b, password="not-the-password")
    management_call(b.url.replace("amqp://", f"amqp://alice:{PW}@"), "queue.stat")
    audit = tmp_path / "audit.jsonl"  # relative to the config file's directory
    events = wait_for(lambda: _events(audit) if len(_events(audit)) >= 5 else None, message="audit events")
    kinds = [e["event"] for e in events]
    assert kinds.count("login") == 2 and kinds.count("login_failed") == 1
    assert {"event": "denied", "user": "alice", "operation": "send", "address": "forbidden"}.items() <= \
        next(e for e in events if e["event"] == "denied").items()
    assert next(e for e in events if e["event"] == "management")["operation"] == "queue.stat"
    assert stat.S_IMODE(os.stat(audit).st_mode) == 0o600
    assert PW not in audit.read_text() and "not-the-password" not in audit.read_text()


def _events(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_user_id_is_validated_against_the_login(start_broker):
    b = start_broker(config=config("validate_user_id = true\n"))
    client = engine_login(b.address, "alice", PW)
    assert client.send("q.uid", Message(body="mine", user_id=b"alice")) == proton.Delivery.ACCEPTED
    assert client.send("q.uid", Message(body="unset")) == proton.Delivery.ACCEPTED
    assert client.send("q.uid", Message(body="forged", user_id=b"bob")) == proton.Delivery.REJECTED
    assert client.last_condition.name == "amqp:unauthorized-access"
