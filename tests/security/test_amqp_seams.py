"""The seams between AMQP features where rights leaked (issue 28, findings 3, 4, 5, 6 and 16, and
ownership of lingering subscriptions and temporary queues), as the contract's "Security" and
"Delivery guarantees" sections say they must hold. Real broker, real sockets: Proton's blocking
client where it can say what the case needs, frames written by hand where no Proton client sends
what the case needs (an attach's unsettled map)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from proton import Described, Message, uint, ulong
from proton.reactor import Copy, DurableSubscription, LinkOption, Selector
from proton.utils import BlockingConnection, LinkDetached

from hermod.broker.security.passwords import hash_password
from hermod.broker.tools.clients import Capabilities, management_call
from hermod_testing import wait_for

for helper_dir in ("wire", "ops"):
    path = str(Path(__file__).resolve().parent.parent / helper_dir)
    if path not in sys.path:
        sys.path.insert(0, path)

from amqp_frames import (ATTACH, DISPOSITION, FLOW, SOURCE, TARGET, TRANSFER,  # noqa: E402
                         FrameClient, message)
from ops_support import reload_with  # noqa: E402

PW = {"alice": "alice-pw-1", "mallory": "mallory-pw-2", "bruno": "bruno-pw-3", "reader": "reader-pw-4",
      "root": "root-pw-5"}
ROLES = {"alice": ["payroll"], "mallory": ["staff"], "bruno": ["browser"], "reader": ["reader"], "root": ["admin"]}
EVERYONE = '["admin", "payroll", "staff", "browser", "reader"]'


def config(secret_consumers: str = '["admin"]') -> str:
    """alice: payroll; mallory: staff (everything but payroll and secret); bruno: browse only;
    reader: consume everywhere but secret (unless `secret_consumers` says otherwise)."""
    users = "".join(
        f'[[security.user]]\nname = "{n}"\npassword_hash = "{hash_password(PW[n], iterations=64)}"\n'
        f"roles = {ROLES[n]!r}\n".replace("'", '"') for n in PW)
    return "[security]\nanonymous = false\n" + users + f"""
[[security.permission]]
match = "#"
send = ["admin", "payroll", "staff"]
consume = ["admin", "payroll", "staff", "reader"]
browse = {EVERYONE}
create_address = {EVERYONE}
create_durable_queue = {EVERYONE}
delete_queue = ["admin"]
manage = ["admin"]

[[security.permission]]
match = "payroll.#"
send = ["admin", "payroll"]
consume = ["admin", "payroll"]
browse = ["admin", "payroll"]
create_address = ["admin", "payroll"]
create_durable_queue = ["admin", "payroll"]
delete_queue = ["admin", "payroll"]

[[security.permission]]
match = "secret.#"
send = ["admin"]
consume = {secret_consumers}
browse = ["admin"]
create_address = ["admin"]
create_durable_queue = ["admin"]

[[security.permission]]
match = "VirtualTopic.Payroll"
send = ["admin"]
consume = ["admin", "payroll"]
create_address = ["admin", "payroll"]
create_durable_queue = ["admin", "payroll"]

[[security.permission]]
match = "Consumer.#"             # a grant on consumer queue names (as an ActiveMQ config has): it admits nobody
send = ["staff"]
consume = ["staff"]
browse = ["staff"]
create_address = ["staff"]
create_durable_queue = ["staff"]

[[security.permission]]
match = "news.#"
send = ["admin"]
consume = ["admin", "payroll", "staff"]
browse = ["admin", "payroll", "staff", "browser"]
create_address = {EVERYONE}
create_durable_queue = {EVERYONE}
delete_queue = ["admin"]
"""


@pytest.fixture
def secured(start_broker):
    return start_broker(config=config())


def login(broker, user: str, **kw) -> BlockingConnection:
    return BlockingConnection(broker.url, user=user, password=PW[user], allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, timeout=10, **kw)


def refused(action) -> LinkDetached:
    with pytest.raises(LinkDetached) as info:
        action()
    assert info.value.condition == "amqp:unauthorized-access", str(info.value)
    return info.value


def queue_stat(broker, name: str) -> dict | None:
    url = broker.url.replace("amqp://", f"amqp://root:{PW['root']}@")
    return next((r for r in management_call(url, "queue.stat") if r["queue"] == name), None)


def send(broker, address: str, bodies: list, user: str = "root", **props) -> None:
    conn = login(broker, user)
    try:
        sender = conn.create_sender(address)
        for body in bodies:
            sender.send(Message(body=body, properties=props or None))
    finally:
        conn.close()


TOPIC = Capabilities("topic")


class DynamicTarget(LinkOption):
    """A sender's dynamic target: the broker makes a temporary queue."""

    def apply(self, link) -> None:
        link.target.dynamic = True


# -- raw frames (an unsettled map on an attach) -------------------------------------------------

UNSETTLED_STATE = uint(2)
ACCEPTED = Described(ulong(0x24), [])


def raw_session(broker, container: str, user: str | None = None) -> tuple[FrameClient, int]:
    """A raw connection (PLAIN as `user`, else ANONYMOUS) with one session; the broker's
    next-outgoing-id."""
    client = FrameClient(broker.address)
    client.handshake(container=container, user=user, password=PW.get(user or "", ""))
    begin = client.begin(0)
    return client, int(begin.fields[1])


def raw_receiver(client: FrameClient, name: str, address: str, unsettled=None):
    source = Described(ulong(SOURCE), [address, UNSETTLED_STATE])
    client.send(0, ATTACH, [name, uint(0), True, None, None, source, Described(ulong(TARGET), [None]), unsettled])
    return client.expect(ATTACH)


def raw_sender(client: FrameClient, name: str, address: str, unsettled=None):
    target = Described(ulong(TARGET), [address, UNSETTLED_STATE])
    client.send(0, ATTACH, [name, uint(0), False, None, None, Described(ulong(SOURCE), [None]), target, unsettled])
    reply = client.expect(ATTACH)
    while client.read().code != FLOW:  # the broker's credit
        pass
    return reply


def raw_transfer(client: FrameClient, delivery_id: int, tag: bytes, body: bytes, resume: bool = False) -> None:
    client.send(0, TRANSFER, [uint(0), uint(delivery_id), tag, uint(0), False, False, None, None, resume],
                message(body))


def raw_outcomes(client: FrameClient, count: int) -> dict[int, str]:
    """delivery id -> outcome descriptor of the next `count` deliveries the broker decided."""
    got: dict[int, str] = {}
    while len(got) < count:
        f = client.expect(DISPOSITION)
        first, last = int(f.fields[1]), int(f.fields[2] if f.fields[2] is not None else f.fields[1])
        for i in range(first, last + 1):
            got[i] = hex(int(f.fields[4].descriptor)) if f.fields[4] is not None else None
    return got


def raw_settle(client: FrameClient, delivery_id: int) -> None:
    """The sending client settles one of its deliveries (role sender)."""
    client.send(0, DISPOSITION, [False, uint(delivery_id), uint(delivery_id), True, ACCEPTED])


def raw_credit(client: FrameClient, next_incoming: int, credit: int) -> None:
    client.send(0, FLOW, [uint(next_incoming), uint(2 ** 31 - 1), uint(0), uint(2 ** 31 - 1), uint(0),
                          uint(0), uint(credit)])


def raw_tags(client: FrameClient, count: int) -> list[bytes]:
    return [bytes(client.expect(TRANSFER).fields[2]) for _ in range(count)]


def unsettled_map(reply) -> dict:
    return (reply.fields[7] if len(reply.fields) > 7 else None) or {}


# -- finding 3: link recovery belongs to the user who made it ---------------------------------------

def test_another_users_attach_under_the_same_link_gets_none_of_its_recovery_state(secured):
    send(secured, "payroll.q", [f"salary {i}" for i in range(5)])
    alice, next_id = raw_session(secured, "shared-app", "alice")
    raw_receiver(alice, "inbox", "payroll.q")
    raw_credit(alice, next_id, 5)
    tags = raw_tags(alice, 5)
    alice.close()  # lost with five deliveries unsettled
    wait_for(lambda: queue_stat(secured, "payroll.q")["consumers"] == 0, message="alice's link gone")

    # mallory may not consume payroll.q; she attaches on public.q under alice's container id and
    # link name and claims alice's deliveries accepted.
    mallory, _ = raw_session(secured, "shared-app", "mallory")
    reply = raw_receiver(mallory, "inbox", "public.q", unsettled={tag: ACCEPTED for tag in tags})
    assert unsettled_map(reply) == {}  # none of alice's tags
    mallory.close()
    stat = queue_stat(secured, "payroll.q")
    assert (stat["messages"], stat["acked"]) == (5, 0)  # nothing acknowledged away

    # The state is still alice's: her own recovery gets it.
    again, next_id = raw_session(secured, "shared-app", "alice")
    reply = raw_receiver(again, "inbox", "payroll.q", unsettled={tags[0]: ACCEPTED})
    assert set(unsettled_map(reply)) == set(tags)
    wait_for(lambda: queue_stat(secured, "payroll.q")["acked"] == 1, message="alice's own acceptance applied")
    again.close()


def test_another_users_sender_attach_learns_nothing_of_the_links_tags(secured):
    alice, _ = raw_session(secured, "shared-sender", "alice")
    raw_sender(alice, "out", "payroll.out")
    raw_transfer(alice, 0, b"tag-1", b"alice's")
    assert raw_outcomes(alice, 1) == {0: "0x24"}
    alice.close()

    mallory, _ = raw_session(secured, "shared-sender", "mallory")
    reply = raw_sender(mallory, "out", "public.out", unsettled={b"tag-1": None})
    assert unsettled_map(reply) == {}
    raw_transfer(mallory, 0, b"tag-1", b"mallory's")  # hers: a new message, not "already had"
    assert raw_outcomes(mallory, 1) == {0: "0x24"}
    mallory.close()
    wait_for(lambda: (queue_stat(secured, "public.out") or {}).get("messages") == 1, message="mallory's message stored")


def test_recovery_is_checked_against_the_address_the_recovered_deliveries_are_on(start_broker):
    """alice's recovery state is on payroll.q; once a reload takes `consume` there away from
    her, an attach on an address she may read does not acknowledge her payroll deliveries."""
    b = start_broker(config=config())
    send(b, "payroll.q", ["p1", "p2"])
    alice, next_id = raw_session(b, "alice-app", "alice")
    raw_receiver(alice, "inbox", "payroll.q")
    raw_credit(alice, next_id, 2)
    tags = raw_tags(alice, 2)
    alice.close()
    wait_for(lambda: queue_stat(b, "payroll.q")["consumers"] == 0, message="alice's link gone")
    reload_with(b, config().replace('consume = ["admin", "payroll"]', 'consume = ["admin"]'))

    again, _ = raw_session(b, "alice-app", "alice")
    reply = raw_receiver(again, "inbox", "public.q", unsettled={tag: ACCEPTED for tag in tags})
    assert unsettled_map(reply) == {}
    again.close()
    stat = queue_stat(b, "payroll.q")
    assert (stat["messages"], stat["acked"]) == (2, 0)


# -- finding 6: a tag the client settled is forgotten -------------------------------------------------

def test_a_recovering_sender_is_told_accepted_only_for_what_it_has_not_settled(broker):
    first, _ = raw_session(broker, "rec6")
    raw_sender(first, "s", "rec6.q")
    raw_transfer(first, 0, b"A", b"one")
    assert raw_outcomes(first, 1) == {0: "0x24"}
    raw_settle(first, 0)  # the client settles A: its tag may now be reused
    raw_transfer(first, 1, b"B", b"two")
    assert raw_outcomes(first, 1) == {1: "0x24"}  # a round trip after the settlement
    first.close()  # lost: B unsettled at the client

    again, _ = raw_session(broker, "rec6")
    reply = raw_sender(again, "s", "rec6.q", unsettled={b"A": None, b"B": None})
    assert unsettled_map(reply) == {b"B": ACCEPTED}  # A was settled: the broker has no A
    raw_transfer(again, 0, b"A", b"three")  # a new message under a reused tag
    raw_transfer(again, 1, b"B", b"two", resume=True)  # the one the broker has: not enqueued twice
    assert raw_outcomes(again, 2) == {0: "0x24", 1: "0x24"}
    again.close()
    url = broker.url
    stat = wait_for(lambda: next((r for r in management_call(url, "queue.stat") if r["queue"] == "rec6.q"), None))
    assert stat["messages"] == 3

    conn = BlockingConnection(url, timeout=10)
    receiver = conn.create_receiver("rec6.q")
    got = [receiver.receive(timeout=10) for _ in range(3)]
    receiver.accept()
    conn.close()
    assert [bytes(m.body) for m in got] == [b"one", b"two", b"three"]


# -- finding 4: browse alone allows only a browser --------------------------------------------------

def test_browse_only_cannot_take_a_durable_subscriptions_messages_by_fqqn(secured):
    """By FQQN `copy` is a browser, whatever the queue; a subscription attached by address with
    `copy` (JMS asks it for every durable subscription) is consumed, so it needs `consume`."""
    alice = login(secured, "alice", container_id="alice-app")
    alice.create_receiver("news.eu", name="sub1", options=[DurableSubscription(), TOPIC]).detach()
    alice.close()
    send(secured, "topic://news.eu", ["n1", "n2", "n3"])
    wait_for(lambda: queue_stat(secured, "alice-app.sub1")["messages"] == 3, message="three on alice's subscription")

    bruno = login(secured, "bruno")
    try:
        err = refused(lambda: bruno.create_receiver("news.eu::alice-app.sub1", name="fqqn-plain"))
        assert "consume" in str(err)
        browser = bruno.create_receiver("news.eu::alice-app.sub1", name="fqqn", options=Copy())  # a browser
        assert [browser.receive(timeout=10).body for _ in range(3)] == ["n1", "n2", "n3"]
        browser.accept()  # a browser's acknowledgement takes nothing
        browser.close()
        for address in ("multicast://news.eu", "topic://news.eu"):  # prefixes
            refused(lambda: bruno.create_receiver(address, name=address, options=Copy()))
        for address in ("news.eu", "news.#", "news.*"):  # a subscription, plain or wildcard
            refused(lambda: bruno.create_receiver(address, name=f"sub-{address}", options=[Copy(), TOPIC]))
        refused(lambda: bruno.create_receiver("news.a,topic://news.eu", name="composite", options=Copy()))
    finally:
        bruno.close()
    stat = queue_stat(secured, "alice-app.sub1")
    assert (stat["messages"], stat["acked"]) == (3, 0)


def test_browse_only_still_browses_an_anycast_queue(secured):
    send(secured, "news.board", ["b1", "b2"])
    bruno = login(secured, "bruno")
    try:
        browser = bruno.create_receiver("news.board", options=Copy())
        assert [browser.receive(timeout=10).body for _ in range(2)] == ["b1", "b2"]
        browser.close()
        refused(lambda: bruno.create_receiver("news.board"))
    finally:
        bruno.close()
    assert queue_stat(secured, "news.board")["messages"] == 2


def test_a_virtual_topic_consumer_queue_is_checked_against_the_topics_address(secured):
    mallory, alice = login(secured, "mallory"), login(secured, "alice")
    try:
        err = refused(lambda: mallory.create_receiver("Consumer.A.VirtualTopic.Payroll"))
        assert "consume" in str(err) and "address VirtualTopic.Payroll" in str(err)
        receiver = alice.create_receiver("Consumer.A.VirtualTopic.Payroll")
        send(secured, "topic://VirtualTopic.Payroll", ["march"])
        assert receiver.receive(timeout=10).body == "march"
        receiver.accept()
    finally:
        mallory.close()
        alice.close()


# -- finding 5: a wildcard subscription receives only what its user may consume ---------------------

def received_until(receiver, marker: str) -> list:
    """Bodies received up to and including `marker` (sent last)."""
    got = []
    while not got or got[-1] != marker:
        got.append(receiver.receive(timeout=10).body)
        receiver.accept()
    return got


def test_a_wildcard_subscription_does_not_receive_from_addresses_its_user_may_not_consume(secured):
    send(secured, "secret.salaries", ["warm-up"])  # the address exists before the subscriptions
    reader = login(secured, "reader")
    try:
        everything = reader.create_receiver("#", options=TOPIC)
        salaries = reader.create_receiver("*.salaries", options=TOPIC)
        refused(lambda: reader.create_receiver("secret.#", options=TOPIC))  # consume on the pattern
        send(secured, "topic://secret.salaries", ["secret 1"])
        send(secured, "topic://secret.bonus", ["secret 2"])  # an address made after the subscriptions
        send(secured, "topic://public.salaries", ["public"])
        assert received_until(salaries, "public") == ["public"]
        assert received_until(everything, "public") == ["public"]
    finally:
        reader.close()


def test_a_reload_rebinds_wildcard_subscriptions_to_what_the_user_may_now_consume(start_broker):
    b = start_broker(config=config())
    send(b, "secret.salaries", ["warm-up"])
    reader = login(b, "reader")
    try:
        sub = reader.create_receiver("*.salaries", options=TOPIC)
        reload_with(b, config(secret_consumers='["admin", "reader"]'))  # granted
        send(b, "topic://secret.salaries", ["granted"])
        send(b, "topic://public.salaries", ["public 1"])
        assert received_until(sub, "public 1") == ["granted", "public 1"]
        reload_with(b, config())  # and taken away again
        send(b, "topic://secret.salaries", ["revoked"])
        send(b, "topic://public.salaries", ["public 2"])
        assert received_until(sub, "public 2") == ["public 2"]
    finally:
        reader.close()


# -- finding 16: replacing a durable subscription needs delete_queue --------------------------------

def test_replacing_a_durable_subscription_needs_delete_queue(secured):
    alice = login(secured, "alice", container_id="alice-sel")
    alice.create_receiver("news.sel", name="sub", options=[DurableSubscription(), TOPIC, Selector("a = 1")]).detach()
    alice.close()
    send(secured, "topic://news.sel", ["s1", "s2", "s3"], a=1)
    wait_for(lambda: queue_stat(secured, "alice-sel.sub")["messages"] == 3, message="three on the subscription")

    for address, options in (("news.sel", [Selector("a = 2")]), ("news.sel", []), ("news.other", [Selector("a = 1")])):
        alice = login(secured, "alice", container_id="alice-sel")  # another selector, none, another address
        try:
            err = refused(lambda: alice.create_receiver(address, name="sub",
                                                        options=[DurableSubscription(), TOPIC, *options]))
            assert "delete_queue" in str(err) and "news.sel" in str(err)
        finally:
            alice.close()
    stat = queue_stat(secured, "alice-sel.sub")
    assert (stat["address"], stat["messages"]) == ("news.sel", 3)

    for selector in ("a = 1", "a = 2"):  # admin holds delete_queue: replaced
        root = login(secured, "root", container_id="root-sel")
        try:
            root.create_receiver("news.sel", name="sub", options=[DurableSubscription(), TOPIC, Selector(selector)])
        finally:
            root.close()
        if selector == "a = 1":
            send(secured, "topic://news.sel", ["r1"], a=1)
            wait_for(lambda: queue_stat(secured, "root-sel.sub")["messages"] == 1, message="one on root's")
    assert queue_stat(secured, "root-sel.sub")["messages"] == 0


# -- ownership: lingering subscriptions and temporary queues ------------------------------------------

def test_a_lingering_subscription_belongs_to_its_user(secured):
    alice = login(secured, "alice", container_id="linger-app")
    mallory = login(secured, "mallory", container_id="linger-app")
    try:
        alice.create_receiver("news.linger", name="sub", options=TOPIC).link.detach()  # kept: not closed
        alice.create_sender("payroll.sync").close()  # a round trip: the detach was handled
        send(secured, "topic://news.linger", ["kept for alice"])
        err = refused(lambda: mallory.create_receiver("news.linger", name="sub", options=TOPIC))
        assert "another user" in str(err)
        again = alice.create_receiver("news.linger", name="sub", options=TOPIC)
        assert again.receive(timeout=10).body == "kept for alice"
        again.accept()
    finally:
        mallory.close()
        alice.close()


def test_a_temporary_queue_belongs_to_its_user(secured):
    alice = login(secured, "alice")
    mallory = login(secured, "mallory")
    try:
        temporary = alice.create_receiver(None, dynamic=True)
        name = temporary.link.remote_source.address
        mallory.create_sender(name).send(Message(body="reply"))  # anyone may send a reply to it
        err = refused(lambda: mallory.create_receiver(name))
        assert "another user" in str(err)
        assert temporary.receive(timeout=10).body == "reply"
        temporary.accept()
    finally:
        mallory.close()
        alice.close()


def test_a_temporary_queue_a_sender_made_belongs_to_its_user(secured):
    alice = login(secured, "alice")
    mallory = login(secured, "mallory")
    try:
        sender = alice.create_sender(None, options=DynamicTarget())
        name = sender.link.remote_target.address
        sender.send(Message(body="alice's"))
        err = refused(lambda: mallory.create_receiver(name))
        assert "another user" in str(err)
        receiver = alice.create_receiver(name)
        assert receiver.receive(timeout=10).body == "alice's"
        receiver.accept()
    finally:
        mallory.close()
        alice.close()


def test_a_durable_subscription_belongs_to_its_user_without_any_permission_configured(start_broker):
    """Users differ whether or not `[[security.permission]]` entries exist (none: everybody may
    do everything, but a subscription is still its maker's)."""
    b = start_broker(config=config().split("[[security.permission]]")[0])
    alice = login(b, "alice", container_id="open-app")
    alice.create_receiver("news.open", name="sub", options=[DurableSubscription(), TOPIC])
    alice.close()
    mallory = login(b, "mallory", container_id="open-app")
    try:
        err = refused(lambda: mallory.create_receiver("news.open", name="sub", options=[DurableSubscription(), TOPIC]))
        assert "another user" in str(err)
    finally:
        mallory.close()
