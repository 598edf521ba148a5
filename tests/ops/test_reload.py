"""SIGHUP re-reads the configuration file (contract, Operations): addresses, queues, address
settings, diverts, users and permissions apply without dropping a connection; an invalid file is
one log line and the running configuration stays; restart-only keys are named. Real broker
process, real AMQP clients, a real signal."""
from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection, LinkDetached

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import management_call
from ops_support import count_logged, logged, reload_with

NO_AUTO_CREATE = """
[[address_settings]]
match = "#"
auto_create_addresses = false
auto_create_queues = false

[[address]]
name = "orders"
  [[address.queue]]
  name = "orders"
"""

WITH_AUDIT = NO_AUTO_CREATE + """
[[address]]
name = "audit"
  [[address.queue]]
  name = "audit"

[[divert]]
name = "orders-to-audit"
address = "orders"
forwarding_address = "audit"
exclusive = false
"""


def not_found(action) -> None:
    with pytest.raises(LinkDetached) as info:
        action()
    assert info.value.condition == "amqp:not-found", str(info.value)


def test_open_connection_keeps_working_across_a_reload_that_adds_a_queue_and_a_divert(start_broker):
    b = start_broker(config=NO_AUTO_CREATE)
    conn = BlockingConnection(b.url, timeout=10)
    try:
        sender, receiver = conn.create_sender("orders"), conn.create_receiver("orders", credit=10)
        sender.send(Message(body="before"))
        assert receiver.receive(timeout=10).body == "before"
        receiver.accept()
        not_found(lambda: conn.create_receiver("audit"))

        reload_with(b, WITH_AUDIT)

        sender.send(Message(body="after"))  # the same links, the same connection
        assert receiver.receive(timeout=10).body == "after"
        receiver.accept()
        audit = conn.create_receiver("audit", credit=10)  # the new queue, fed by the new divert
        assert audit.receive(timeout=10).body == "after"
        audit.accept()
    finally:
        conn.close()
    assert count_logged(b, "configuration reload failed") == 0


def test_invalid_file_is_one_log_line_and_nothing_of_it_applies(start_broker):
    b = start_broker(config=NO_AUTO_CREATE)
    conn = BlockingConnection(b.url, timeout=10)
    try:
        sender = conn.create_sender("orders")
        # Parses as TOML and names a new queue, but its diverts form a ring: refused as a
        # whole, so the queue is not created either.
        cycle = WITH_AUDIT + """
[[divert]]
name = "audit-to-orders"
address = "audit"
forwarding_address = "orders"
"""
        record = reload_with(b, cycle, outcome="configuration reload failed")
        assert record["level"] == "ERROR" and "cycle" in record["msg"]
        not_found(lambda: conn.create_receiver("audit"))

        record = reload_with(b, NO_AUTO_CREATE + "\n[server]\nno_such_key = 1\n",
                             outcome="configuration reload failed")
        assert "server.no_such_key: unknown key" in record["msg"]
        record = reload_with(b, "[[address]\nname = 'x'", outcome="configuration reload failed")
        assert "invalid TOML" in record["msg"] and "\n" not in record["msg"]

        sender.send(Message(body="still served"))
        receiver = conn.create_receiver("orders")
        assert receiver.receive(timeout=10).body == "still served"
        receiver.accept()
    finally:
        conn.close()
    assert count_logged(b, "configuration reloaded") == 0
    assert count_logged(b, "configuration reload failed") == 3


PW = {"alice": "alice-pw", "bob": "bob-pw"}


def secured(users: list[str], consume_roles: list[str]) -> str:
    text = "[security]\nanonymous = false\n"
    for name in users:
        text += (f'[[security.user]]\nname = "{name}"\n'
                 f'password_hash = "{hash_password(PW[name], iterations=64)}"\nroles = ["staff"]\n')
    roles = ", ".join(f'"{r}"' for r in consume_roles)
    return text + f"""
[[security.permission]]
match = "#"
send = ["staff"]
consume = [{roles}]
create_address = ["staff"]
create_durable_queue = ["staff"]
"""


def login(broker, user: str) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=PW[user], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)


def test_users_and_permissions_apply_to_the_next_login_and_attach(start_broker):
    b = start_broker(config=secured(["alice"], ["staff"]))
    alice = login(b, "alice")
    try:
        sender = alice.create_sender("work")
        held = alice.create_receiver("work", credit=10)
        sender.send(Message(body="one"))
        assert held.receive(timeout=10).body == "one"
        held.accept()
        with pytest.raises(Exception):  # noqa: B017 - no such user yet: the login is refused
            login(b, "bob").close()

        reload_with(b, secured(["alice", "bob"], ["nobody"]))

        # The consume right is gone: the open receiver is detached (issue 28), the connection
        # and its sender carry on, and the next consume attach is refused too.
        with pytest.raises(LinkDetached) as gone:
            held.receive(timeout=10)
        assert gone.value.condition == "amqp:unauthorized-access"
        sender.send(Message(body="two"))
        with pytest.raises(LinkDetached) as info:
            alice.create_receiver("work", name="after-reload")
        assert info.value.condition == "amqp:unauthorized-access"
        bob = login(b, "bob")  # the added user logs in
        try:
            bob.create_sender("work").send(Message(body="from bob"))
        finally:
            bob.close()
    finally:
        alice.close()


def test_restart_only_keys_are_named_and_keep_their_running_values(start_broker):
    b = start_broker(config=NO_AUTO_CREATE)
    changed = "[server]\nexpiry_scan_ms = 1000\n[store]\ngive_up_s = 5\n" + NO_AUTO_CREATE
    reload_with(b, changed)
    record = logged(b, "need a restart")
    assert record["level"] == "WARNING"
    assert "server.expiry_scan_ms" in record["msg"] and "store.give_up_s" in record["msg"]
    assert "server.port" not in record["msg"]  # --port 0 on the command line still applies


def test_a_queue_removed_from_the_file_stays_with_its_messages(start_broker):
    """Artemis's default `config-delete-queues = OFF`: a configured queue that leaves the file
    is kept; deleting it is a management operation."""
    b = start_broker(config=WITH_AUDIT)
    conn = BlockingConnection(b.url, timeout=10)
    try:
        conn.create_sender("audit").send(Message(body="kept"))
        reload_with(b, NO_AUTO_CREATE)
        assert logged(b, "address audit is no longer in the configuration file")
        # The divert went with the file: orders no longer copies to audit.
        conn.create_sender("orders").send(Message(body="not copied"))
        assert conn.create_receiver("orders").receive(timeout=10).body == "not copied"
        depth = {r["queue"]: r["messages"] for r in management_call(b.url, "queue.stat")}
        assert depth["audit"] == 1
        receiver = conn.create_receiver("audit")
        assert receiver.receive(timeout=10).body == "kept"
        receiver.accept()
    finally:
        conn.close()
