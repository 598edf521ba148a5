"""Permissions (issue 13, item 3), exactly as the contract's "Security" section says: the most
specific `[[security.permission]]` match decides with no merging; send at attach and per message
on a relay link; consume, browse, create_address, create_durable_queue, delete_queue, manage;
durable subscriptions belong to their creator. Real broker, real clients."""
from __future__ import annotations

import proton
import pytest
from proton import Message
from proton.reactor import DurableSubscription
from proton.utils import BlockingConnection, LinkDetached

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import Capabilities, management_call
from security_clients import engine_login, relay_send

PW = {"alice": "alice-pw-1", "bob": "bob-pw-2", "root": "root-pw-3", "carol": "carol-pw-4"}
ROLES = {"alice": ["producer", "consumer"], "bob": ["consumer"], "root": ["admin"], "carol": ["producer"]}

CONFIG = "[security]\nanonymous = false\n" + "".join(
    f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\n'
    f"roles = {ROLES[n]!r}\n".replace("'", '"') for n in PW) + """
[[security.permission]]
match = "orders.#"
send = ["producer"]
consume = ["consumer"]
browse = ["consumer"]
create_address = ["producer", "consumer"]
create_durable_queue = ["producer", "consumer"]
delete_queue = ["admin"]

[[security.permission]]
match = "orders.secret"          # more specific: decides alone, nobody may send
consume = ["admin"]
create_address = ["admin"]
create_durable_queue = ["admin"]

[[security.permission]]
match = "closed.#"               # send, but create nothing
send = ["producer"]
browse = ["admin"]

[[security.permission]]
match = "half.#"                 # the address, but no durable queue
send = ["producer"]
create_address = ["producer"]

[[security.permission]]
match = "news.#"
consume = ["consumer"]
browse = ["admin"]
create_address = ["consumer"]
create_durable_queue = ["consumer"]
delete_queue = ["admin"]

[[security.permission]]
match = "hermod.management"
manage = ["admin"]
send = ["admin"]

[[security.permission]]
match = "#"                      # the administrators: management reads and writes everywhere
browse = ["admin"]
manage = ["admin"]

[[address]]
name = "closed.fixed"
  [[address.queue]]
  name = "closed.fixed"
"""


@pytest.fixture
def secured(start_broker):
    return start_broker(config=CONFIG)


def login(broker, user: str, **kw) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=PW[user], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10, **kw)


def refused(action) -> LinkDetached:
    with pytest.raises(LinkDetached) as info:
        action()
    assert info.value.condition == "amqp:unauthorized-access", str(info.value)
    return info.value


def denial_logged(broker, user: str, op: str, address: str) -> bool:
    from hermod_testing import wait_for
    line = f"denied: user {user} may not {op} on address {address}"
    return wait_for(lambda: any(line in l for l in broker.stderr_lines), message=line)


def test_send_and_consume_follow_roles(secured):
    alice, bob = login(secured, "alice"), login(secured, "bob")
    try:
        alice.create_sender("orders.new").send(Message(body="o1"))
        err = refused(lambda: bob.create_sender("orders.new"))
        assert "send" in str(err) and "orders.new" in str(err)
        assert denial_logged(secured, "bob", "send", "orders.new")
        assert bob.create_receiver("orders.new").receive(timeout=10).body == "o1"
    finally:
        alice.close()
        bob.close()


def test_most_specific_match_decides_without_merging(secured):
    alice, root = login(secured, "alice"), login(secured, "root")
    try:
        # orders.# lets producers send, but orders.secret is more specific and grants no send.
        err = refused(lambda: alice.create_sender("orders.secret"))
        assert "orders.secret" in str(err)
        refused(lambda: alice.create_receiver("orders.secret"))
        root.create_receiver("orders.secret")  # admin consumes (and may create it)
        # An address no entry matches allows nothing.
        refused(lambda: alice.create_sender("elsewhere"))
    finally:
        alice.close()
        root.close()


def test_browse_is_its_own_permission(secured):
    from proton.reactor import Copy
    root = login(secured, "root")
    try:
        err = refused(lambda: root.create_receiver("orders.new", options=Copy()))
        assert "browse" in str(err)
    finally:
        root.close()


def test_relay_link_checks_send_per_message(secured):
    client = engine_login(secured.address, "alice", PW["alice"])
    state, cond, text = relay_send(client, "orders.relay", "allowed")
    assert (state, cond) == (proton.Delivery.ACCEPTED, None)
    state, cond, text = relay_send(client, "orders.secret", "not allowed")
    assert (state, cond) == (proton.Delivery.REJECTED, "amqp:unauthorized-access")
    assert "send" in text and "orders.secret" in text
    # The link is still usable after a denial.
    assert relay_send(client, "orders.relay", "again")[0] == proton.Delivery.ACCEPTED
    # Management is open to whoever may browse or manage somewhere (each operation is then
    # checked on its address): carol may only send, so a request relayed there is refused.
    carol = engine_login(secured.address, "carol", PW["carol"])
    state, cond, _ = relay_send(carol, "hermod.management", "no manage")
    assert (state, cond) == (proton.Delivery.REJECTED, "amqp:unauthorized-access")
    assert relay_send(carol, "orders.relay", "still sends")[0] == proton.Delivery.ACCEPTED


def test_creating_needs_create_address_and_create_durable_queue(secured):
    alice = login(secured, "alice")
    try:
        alice.create_sender("closed.fixed").send(Message(body="exists"))  # configured: no creation
        err = refused(lambda: alice.create_sender("closed.new"))
        assert "create_address" in str(err) and "closed.new" in str(err)
        err = refused(lambda: alice.create_sender("half.new"))
        assert "create_durable_queue" in str(err)
    finally:
        alice.close()
    rows = management_call(secured.url.replace("amqp://", f"amqp://root:{PW['root']}@"), "address.stat")
    names = {r["address"] if isinstance(r, dict) else r for r in rows}
    assert "half.new" not in names and "closed.new" not in names  # a denial creates nothing


def test_manage_guards_the_management_endpoint(secured):
    """The endpoint admits a user who may browse or manage somewhere, and shows each only what
    it may browse; one with neither right (carol only sends) is refused at attach."""
    user_url = secured.url.replace("amqp://", "amqp://{}:{}@")
    with pytest.raises(ConnectionError) as info:
        management_call(user_url.format("carol", PW["carol"]), "queue.stat")
    assert "unauthorized-access" in str(info.value)
    assert not any(r["queue"] == "closed.fixed" for r in
                   management_call(user_url.format("alice", PW["alice"]), "queue.stat"))
    rows = management_call(user_url.format("root", PW["root"]), "queue.stat")
    assert any(r["queue"] == "closed.fixed" for r in rows)


def test_durable_subscription_belongs_to_its_creator_and_closing_needs_delete_queue(secured):
    topic = Capabilities("topic")
    alice = login(secured, "alice", container_id="shared-client-id")
    sub = alice.create_receiver("news.eu", name="sub1", options=[DurableSubscription(), topic])
    sub.detach()
    alice.close()

    bob = login(secured, "bob", container_id="shared-client-id")
    try:
        err = refused(lambda: bob.create_receiver("news.eu", name="sub1", options=[DurableSubscription(), topic]))
        assert "belongs to another user" in str(err)
    finally:
        bob.close()

    # Alice may consume but not delete_queue on news.#: closing her subscription is refused
    # and the subscription stays.
    alice = login(secured, "alice", container_id="shared-client-id")
    try:
        sub = alice.create_receiver("news.eu", name="sub1", options=[DurableSubscription(), topic])
        sub.close()
        cond = sub.link.remote_condition
        assert cond is not None and cond.name == "amqp:unauthorized-access"
        assert "delete_queue" in cond.description and "news.eu" in cond.description
    finally:
        alice.close()
    rows = management_call(secured.url.replace("amqp://", f"amqp://root:{PW['root']}@"), "queue.stat")
    assert any(r["address"] == "news.eu" and r["durable"] for r in rows)
