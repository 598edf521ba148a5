"""A reload that takes a right away or removes a user ends the STOMP connections that no longer
hold (contract, Security): a subscriber that may no longer consume gets an ERROR naming the
refusal and its connection closes; a removed user's connection is closed; others carry on."""
from __future__ import annotations

import signal
from pathlib import Path

from stomp_clients import Raw

from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for


def config(users: list[str], consume: list[str]) -> str:
    text = "[security]\nanonymous = false\n"
    for name in users:
        text += (f'[[security.user]]\nname = "{name}"\npassword_hash = "{hash_password(name + "-pw", iterations=64)}"\n'
                 f'roles = ["{name}"]\n')
    text += ('[[security.permission]]\nmatch = "#"\nsend = ["alice", "bob"]\n'
             f'consume = [{", ".join(repr(c).replace(chr(39), chr(34)) for c in consume)}]\n'
             'create_address = ["alice", "bob"]\ncreate_durable_queue = ["alice", "bob"]\n')
    return text


def reload_with(broker, text: str) -> None:
    before = sum("configuration reloaded" in line for line in broker.stderr_lines)
    Path(broker.args[broker.args.index("--config") + 1]).write_text(text)
    broker.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: sum("configuration reloaded" in line for line in broker.stderr_lines) > before,
             message="the reload")


def login(broker, user: str) -> Raw:
    raw = Raw(broker)
    assert raw.connect("1.2", user, user + "-pw").command == "CONNECTED"
    return raw


def test_a_reload_ends_what_no_longer_holds(start_broker):
    broker = start_broker(config=config(["alice", "bob"], ["alice", "bob"]))
    alice, bob = login(broker, "alice"), login(broker, "bob")
    alice.frame("SUBSCRIBE", [("destination", "/queue/work"), ("id", "s"), ("receipt", "r")])
    assert alice.until("RECEIPT").header("receipt-id") == "r"
    bob.frame("SEND", [("destination", "/queue/other"), ("receipt", "r")], b"x")
    assert bob.until("RECEIPT").header("receipt-id") == "r"

    reload_with(broker, config(["alice", "bob"], ["bob"]))  # alice may no longer consume
    error = alice.until("ERROR")
    assert error.header("message").startswith("not authorized") and "consume" in error.header("message")
    assert alice.closed_by_broker()
    bob.frame("SEND", [("destination", "/queue/other"), ("receipt", "still")], b"y")
    assert bob.until("RECEIPT").header("receipt-id") == "still"

    reload_with(broker, config(["alice"], ["alice"]))  # bob is gone
    assert "bob may no longer log in" in bob.until("ERROR").header("message")
    assert bob.closed_by_broker()
