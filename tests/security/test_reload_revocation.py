"""A reload takes rights away from open connections too (issue 28: "revoked users keep their
open connections after a reload"; contract, "Security"): a link whose right was removed is
detached with `amqp:unauthorized-access` while the connection's other links carry on, a removed
user's connections are closed with `amqp:unauthorized-access`, and bystanders never notice.
Real broker process, real AMQP clients, a real SIGHUP."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed, LinkDetached

from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for

UNAUTHORIZED = "amqp:unauthorized-access"
PW = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
HASHES = {name: hash_password(pw, iterations=64) for name, pw in PW.items()}

ADDRESSES = """
[[address]]
name = "orders.in"
  [[address.queue]]
  name = "orders.in"
[[address]]
name = "orders.out"
  [[address.queue]]
  name = "orders.out"
"""


def config(users: dict[str, list[str]], extra: str = "") -> str:
    text = "[security]\nanonymous = false\n"
    for name, roles in users.items():
        text += (f'[[security.user]]\nname = "{name}"\npassword_hash = "{HASHES[name]}"\n'
                 f'roles = [{", ".join(repr(r).replace(chr(39), chr(34)) for r in roles)}]\n')
    return text + """
[[security.permission]]
match = "#"
send = ["staff"]
consume = ["staff"]
browse = ["staff"]
create_address = ["staff"]
create_durable_queue = ["staff"]
""" + extra + ADDRESSES


BOB_MAY_NOT_CONSUME_ORDERS_IN = """
[[security.permission]]
match = "orders.in"
send = ["staff"]
consume = ["alice-only"]
browse = ["alice-only"]
"""


def login(broker, user: str) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=PW[user], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10)


def reload_with(broker, text: str) -> None:
    before = sum("configuration reloaded" in line for line in broker.stderr_lines)
    path = Path(broker.args[broker.args.index("--config") + 1])
    path.write_text(text)
    broker.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: sum("configuration reloaded" in line for line in broker.stderr_lines) > before,
             message="configuration reloaded")


def round_trip(conn: BlockingConnection, address: str, body: str) -> None:
    sender = conn.create_sender(address, name=f"trip-out-{body}")
    sender.send(Message(body=body))
    receiver = conn.create_receiver(address, name=f"trip-in-{body}")
    assert receiver.receive(timeout=10).body == body
    receiver.accept()
    receiver.close()
    sender.close()


def test_a_removed_right_detaches_that_link_and_a_removed_user_loses_the_connection(start_broker):
    everyone = {"alice": ["staff", "alice-only"], "bob": ["staff"]}
    b = start_broker(config=config(everyone))
    alice, bob = login(b, "alice"), login(b, "bob")
    try:
        consumer = bob.create_receiver("orders.in", credit=10)
        producer = bob.create_sender("orders.out")
        feed = alice.create_sender("orders.in")
        feed.send(Message(body="before"))
        assert consumer.receive(timeout=10).body == "before"
        consumer.accept()
        producer.send(Message(body="first"))  # a round trip on bob's connection: the accept is out

        reload_with(b, config(everyone, BOB_MAY_NOT_CONSUME_ORDERS_IN))

        with pytest.raises(LinkDetached) as detached:
            consumer.receive(timeout=10)  # the detach arrives while waiting
        assert detached.value.condition == UNAUTHORIZED, str(detached.value)
        # The same connection's producer carries on, and alice gets what it sends.
        producer.send(Message(body="still sending"))
        out = alice.create_receiver("orders.out")
        for body in ("first", "still sending"):
            assert out.receive(timeout=10).body == body
            out.accept()
        # A message for orders.in now reaches alice, who may still consume there.
        feed.send(Message(body="for alice"))
        mine = alice.create_receiver("orders.in")
        assert mine.receive(timeout=10).body == "for alice"
        mine.accept()

        reload_with(b, config({"alice": ["staff", "alice-only"]}, BOB_MAY_NOT_CONSUME_ORDERS_IN))

        with pytest.raises(ConnectionClosed) as closed:
            for n in range(100):  # the close arrives while bob keeps sending
                producer.send(Message(body=f"after removal {n}"))
        assert closed.value.condition == UNAUTHORIZED, str(closed.value)
        assert any("user bob may no longer log in" in line for line in b.stderr_lines)
        round_trip(alice, "orders.out", "bystander")  # alice's connection is unaffected
    finally:
        alice.close()
        try:
            bob.close()
        except Exception:  # noqa: BLE001 - already closed by the broker
            pass


def test_a_role_taken_away_applies_to_the_open_connection(start_broker):
    """Roles are read again: a user who keeps the login but loses a role loses its rights on
    the links it has open, and its next attach is decided with the new roles too."""
    b = start_broker(config=config({"alice": ["staff"], "carol": ["staff"]}))
    carol, alice = login(b, "carol"), login(b, "alice")
    try:
        consumer = carol.create_receiver("orders.in", credit=10)
        reload_with(b, config({"alice": ["staff"], "carol": ["visitor"]}))
        with pytest.raises(LinkDetached) as detached:
            consumer.receive(timeout=10)
        assert detached.value.condition == UNAUTHORIZED
        with pytest.raises(LinkDetached) as refused:
            carol.create_sender("orders.out")
        assert refused.value.condition == UNAUTHORIZED
        round_trip(alice, "orders.in", "bystander")
    finally:
        alice.close()
        carol.close()


def test_a_durable_subscription_whose_consume_was_revoked_keeps_its_messages(start_broker):
    """Detaching for a lost right is not an unsubscribe: the subscription stays with what it
    holds, and is there again once the right is given back."""
    from proton.reactor import DurableSubscription
    topics = '\n[[address]]\nname = "news"\nrouting = ["multicast"]\n'
    staff = {"alice": ["staff"], "bob": ["staff"]}
    b = start_broker(config=config(staff) + topics)
    bob = BlockingConnection(b.url, user="bob", password=PW["bob"], allowed_mechs="PLAIN",
                             allow_insecure_mechs=True, timeout=10, container_id="bob-app")
    alice = login(b, "alice")
    try:
        bob.create_receiver("topic://news", name="bob-news", options=DurableSubscription())
        reload_with(b, config(staff, '[[security.permission]]\nmatch = "news"\nsend = ["staff"]\n') + topics)
        alice.create_sender("topic://news").send(Message(body="kept for bob"))
        reload_with(b, config(staff) + topics)
    finally:
        try:
            bob.close()
        except Exception:  # noqa: BLE001 - its link was detached
            pass
    bob = BlockingConnection(b.url, user="bob", password=PW["bob"], allowed_mechs="PLAIN",
                             allow_insecure_mechs=True, timeout=10, container_id="bob-app")
    try:
        again = bob.create_receiver("topic://news", name="bob-news", options=DurableSubscription())
        assert again.receive(timeout=10).body == "kept for bob"
        again.accept()
    finally:
        bob.close()
        alice.close()


def test_turning_anonymous_off_closes_the_anonymous_connections(start_broker):
    open_door = '[security]\nanonymous = true\n' + ADDRESSES
    b = start_broker(config=open_door)
    guest = BlockingConnection(b.url, timeout=10)
    try:
        sender = guest.create_sender("orders.out")
        sender.send(Message(body="as a guest"))
        reload_with(b, config({"alice": ["staff"]}))
        with pytest.raises(ConnectionClosed) as closed:
            for n in range(100):
                sender.send(Message(body=f"still a guest {n}"))
        assert closed.value.condition == UNAUTHORIZED, str(closed.value)
        alice = login(b, "alice")
        round_trip(alice, "orders.in", "bystander")
        alice.close()
    finally:
        try:
            guest.close()
        except Exception:  # noqa: BLE001 - closed by the broker
            pass


def test_permissions_added_by_a_reload_apply_to_links_attached_while_there_were_none(start_broker):
    """With no permission at all every attach was allowed and nothing was asked: the reload
    asks for what each link uses (its queue's address, its target)."""
    users_only = config({"alice": ["staff"], "bob": ["staff"]}).split("[[security.permission]]")[0] + ADDRESSES
    b = start_broker(config=users_only)
    alice, bob = login(b, "alice"), login(b, "bob")
    try:
        consumer = bob.create_receiver("orders.in", credit=10)
        producer = bob.create_sender("orders.out")
        reload_with(b, config({"alice": ["staff", "alice-only"], "bob": ["staff"]}, BOB_MAY_NOT_CONSUME_ORDERS_IN))
        with pytest.raises(LinkDetached) as detached:
            consumer.receive(timeout=10)
        assert detached.value.condition == UNAUTHORIZED
        producer.send(Message(body="bob still sends"))
        out = alice.create_receiver("orders.out")
        assert out.receive(timeout=10).body == "bob still sends"
        out.accept()
    finally:
        alice.close()
        bob.close()
