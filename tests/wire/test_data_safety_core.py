"""Issue 12, routing core: nothing a producer was told `accepted` is lost, a durable
subscription ends only by its own link, poison properties cannot make a dispatch pass lose
messages, a consumer that dies with a message in flight counts as a delivery attempt, and every
destination of a composite or divert applies its address-full policy."""
from __future__ import annotations

import subprocess
import sys
import uuid

from proton import Delivery, Endpoint, Message

from hermod.broker.tools.clients import management_call
from hermod_testing import wait_for
from wire_helpers import (DurableSubscription, Selector, connect, receive_bodies, send,
                          send_in_background, sync, topic)


def queues(url: str) -> dict[str, dict]:
    return {r["queue"]: r for r in management_call(url, "queue.stat")}


def addresses(url: str) -> set[str]:
    return {r["address"] for r in management_call(url, "address.stat")}


# -- defect 1: accepted, then dropped ---------------------------------------------------------------
def test_auto_created_queue_stays_while_a_sender_is_attached(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("orders")
    sender.send(Message(body="first"))
    r = conn.create_receiver("orders")
    assert receive_bodies(r, 1) == ["first"]
    r.close()
    sync(conn)
    assert "orders" in queues(broker.url)  # the sender still holds it
    later = sender.send(Message(body="second", durable=True))
    assert later.remote_state == Delivery.ACCEPTED
    again = conn.create_receiver("orders")
    assert receive_bodies(again, 1) == ["second"]
    again.close()
    sender.close()
    sync(conn)
    # The last sender gone, the drained auto-created queue and its address go as before.
    assert "orders" not in queues(broker.url) and "orders" not in addresses(broker.url)
    conn.close()


def test_multicast_address_of_an_attached_sender_stays_after_its_last_subscriber(broker):
    """Sends to a subscriber-less multicast address are dropped by design (accepted), not
    refused because the address went with the last subscription."""
    conn = connect(broker.url)
    sender = conn.create_sender("topic://ticker")
    sub = conn.create_receiver("ticker", options=[topic()])
    sender.send(Message(body="seen"))
    assert receive_bodies(sub, 1) == ["seen"]
    sub.close()
    sync(conn)
    assert "ticker" in addresses(broker.url)
    assert sender.send(Message(body="nobody listens")).remote_state == Delivery.ACCEPTED
    sub2 = conn.create_receiver("ticker", options=[topic()])
    sender.send(Message(body="seen again"))
    assert receive_bodies(sub2, 1) == ["seen again"]
    conn.close()


def test_durable_send_racing_the_auto_delete_of_its_queue_is_not_lost(start_broker, tmp_path):
    """A relayed durable transfer and the close of the queue's last consumer arrive in one
    batch: the store is still writing the message when the queue would go idle."""
    b = start_broker(store=f"sqlite:///{tmp_path / 'race.db'}")
    conn = connect(b.url)
    for i in range(5):
        name = f"race{i}"
        r = conn.create_receiver(name)
        relay = conn.create_sender(None)
        link = relay.link
        d = link.delivery(str(i))
        link.send(Message(address=name, body=f"m{i}", durable=True).encode())
        link.advance()
        r.link.close()  # written in the same batch as the transfer
        conn.wait(lambda: d.settled or d.remote_state, msg="outcome")
        if d.remote_state == Delivery.ACCEPTED:
            assert receive_bodies(conn.create_receiver(name), 1) == [f"m{i}"]
        else:  # refused is fine; accepted and gone is not
            assert d.remote_state in (Delivery.REJECTED, Delivery.RELEASED)
    conn.close()


# -- defect 2: only the subscription's own link ends a durable subscription ------------------------
def _subscribe(url: str, cid: str = "cid"):
    conn = connect(url, container_id=cid)
    sub = conn.create_receiver("news", name="sub", options=[topic(), DurableSubscription()])
    sub.detach()
    return conn


def test_a_reader_by_fqqn_never_ends_the_durable_subscription(broker):
    owner = _subscribe(broker.url)
    send(owner, "topic://news", ["kept1", "kept2"])
    reader = connect(broker.url)
    r = reader.create_receiver("news::cid.sub", credit=1)
    assert receive_bodies(r, 1) == ["kept1"]
    r.close()  # closed=true, but not the subscription's link
    sync(reader)
    assert queues(broker.url)["cid.sub"]["messages"] == 1
    r2 = reader.create_receiver("news::cid.sub", name="r2", credit=0)
    r2.detach()  # detach without close
    sync(reader)
    r3 = reader.create_receiver("news::cid.sub", name="r3", credit=0)
    session = r3.link.session
    session.close()  # session end with a reader attached
    reader.wait(lambda: session.state & Endpoint.REMOTE_CLOSED, msg="end")
    reader.close()
    reader2 = connect(broker.url)
    reader2.create_receiver("news::cid.sub", name="r4", credit=0)
    reader2.close()  # connection close with a reader attached
    assert "cid.sub" in queues(broker.url)
    again = owner.create_receiver("news", name="sub", options=[topic(), DurableSubscription()])
    assert receive_bodies(again, 1) == ["kept2"]
    again.close()  # the subscription's own link closing: unsubscribe
    sync(owner)
    assert "cid.sub" not in queues(broker.url)
    owner.close()


def test_a_killed_fqqn_reader_never_ends_the_durable_subscription(broker):
    owner = _subscribe(broker.url)
    send(owner, "topic://news", ["kept"])
    script = ("import sys\nfrom proton.utils import BlockingConnection\n"
              "c = BlockingConnection(sys.argv[1], timeout=10)\n"
              "r = c.create_receiver('news::cid.sub', credit=0)\nprint('attached', flush=True)\n"
              "sys.stdin.read()\n")
    client = subprocess.Popen([sys.executable, "-c", script, broker.url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline().strip() == "attached"
    client.kill()
    client.wait()
    wait_for(lambda: queues(broker.url)["cid.sub"]["consumers"] == 0, message="reader gone")
    assert queues(broker.url)["cid.sub"]["messages"] == 1
    owner.close()


def test_a_graceful_stop_keeps_durable_subscriptions_and_their_messages(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'subs.db'}"
    b = start_broker(store=store)
    conn = connect(b.url, container_id="cid")
    conn.create_receiver("news", name="sub", options=[topic(), DurableSubscription()]).detach()
    conn.create_sender("topic://news").send(Message(body="kept", durable=True))
    connect(b.url).create_receiver("news::cid.sub", credit=0)  # attached while the broker stops
    assert b.stop() == 0
    b2 = start_broker(store=store)
    conn = connect(b2.url, container_id="cid")
    again = conn.create_receiver("news", name="sub", options=[topic(), DurableSubscription()])
    assert receive_bodies(again, 1) == ["kept"]
    conn.close()


# -- defect 13: a consumer that dies with a message in flight used a delivery attempt ---------------
CRASHING_CONSUMER = ("import sys\nfrom proton.utils import BlockingConnection\n"
                     "c = BlockingConnection(sys.argv[1], timeout=10)\n"
                     "m = c.create_receiver(sys.argv[2], credit=1).receive()\n"
                     "print(m.body, m.delivery_count, flush=True)\n"
                     "sys.stdin.read()\n")


def _take_and_crash(url: str, address: str) -> str:
    """A client process that receives one message and is killed holding it (no close)."""
    client = subprocess.Popen([sys.executable, "-c", CRASHING_CONSUMER, url, address],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = client.stdout.readline().strip()
    client.kill()
    client.wait()
    return line


def test_a_consumer_crashing_on_a_message_counts_attempts_until_the_dead_letter_address(start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "crash.#"
max_delivery_attempts = 3
dead_letter_address = "crash.dead"
""")
    conn = connect(b.url)
    send(conn, "crash.q", ["poison"])
    seen = [_take_and_crash(b.url, "crash.q") for _ in range(3)]
    assert seen == ["poison 0", "poison 1", "poison 2"]
    wait_for(lambda: queues(b.url).get("crash.dead", {}).get("messages") == 1, message="dead letter")
    assert queues(b.url).get("crash.q", {}).get("messages", 0) == 0
    dead = conn.create_receiver("crash.dead")
    assert receive_bodies(dead, 1) == ["poison"]
    conn.close()


def test_clean_give_backs_do_not_count_attempts(broker):
    """Released, a closed link, a closed connection: the count stays."""
    conn = connect(broker.url)
    send(conn, "clean.q", ["m"])
    r = conn.create_receiver("clean.q", name="r1", credit=1)
    r.receive(timeout=10)
    r.release(delivered=False)
    r.receive(timeout=10)
    r.close()
    other = connect(broker.url)
    other.create_receiver("clean.q", credit=1).receive(timeout=10)
    other.close()
    again = conn.create_receiver("clean.q", name="r2", credit=1).receive(timeout=10)
    assert (again.body, again.delivery_count) == ("m", 0)
    conn.close()


# -- defect 4: poison properties read as absent; a dispatch pass loses nothing ---------------------
from proton.handlers import MessagingHandler  # noqa: E402

from hermod.broker.protocol import codec  # noqa: E402


class RawReceiver(MessagingHandler):
    """A receiver handler that keeps each message's bytes as they came (Proton's own decode
    would refuse the poison) and accepts it."""

    def __init__(self):
        super().__init__(prefetch=0, auto_accept=False)
        self.got: list[bytes] = []

    def on_delivery(self, event) -> None:
        d = event.delivery
        if d.readable and not d.partial:
            self.got.append(event.link.recv(d.pending))
            event.link.advance()
            d.update(Delivery.ACCEPTED)
            d.settle()


def raw_message(*, header=None, properties=None, app=None, body="x") -> bytes:
    out = b""
    if header is not None:
        out += codec.encode_section(codec.HEADER, header)
    if properties is not None:
        out += codec.encode_section(codec.PROPERTIES, properties)
    if app is not None:
        out += codec.encode_section(codec.APPLICATION_PROPERTIES, app)
    return out + codec.encode_section(codec.AMQP_VALUE, body)


def props(**fields) -> list:
    values = [fields.get(name) for name in codec.PROPERTY_FIELDS]
    while values and values[-1] is None:
        values.pop()
    return values


POISON = {
    "group-id a list": raw_message(properties=props(group_id=[1, 2]), app={"k": 2}, body="p1"),
    "absolute-expiry-time a string": raw_message(properties=props(absolute_expiry_time="soon"),
                                                 app={"k": 2}, body="p2"),
    "creation-time NaN": raw_message(properties=props(creation_time=float("nan")), app={"k": 2}, body="p3"),
    "group-sequence a string": raw_message(properties=props(group_id="g", group_sequence="1"),
                                           app={"k": 2}, body="p4"),
    "priority a string": raw_message(header=[True, "high"], app={"k": 2}, body="p5"),
    "ttl negative": raw_message(header=[True, None, -5], app={"k": 2}, body="p6"),
}


def _send_raw(sender, data: bytes):
    link = sender.link
    d = link.delivery(str(uuid.uuid4()))
    link.send(data)
    link.advance()
    return d


def test_poison_properties_read_as_absent_and_pass_through_byte_for_byte(broker):
    """A selective consumer skips the first message; the poison must not make that dispatch
    pass drop it (and itself); a plain consumer then gets both, as sent."""
    conn = connect(broker.url)
    picky = conn.create_receiver("poison.q", name="picky", credit=10,
                                 options=[Selector("k = 1")])
    sender = conn.create_sender("poison.q")
    skipped = raw_message(app={"k": 2}, body="skipped")
    outcomes = [_send_raw(sender, skipped)] + [_send_raw(sender, data) for data in POISON.values()]
    outcomes.append(_send_raw(sender, raw_message(app={"k": 1}, body="wanted")))
    conn.wait(lambda: all(d.remote_state for d in outcomes), msg="outcomes")
    assert [d.remote_state for d in outcomes] == [Delivery.ACCEPTED] * len(outcomes)
    assert picky.receive(timeout=10).body == "wanted"
    picky.accept()
    raw = RawReceiver()
    plain = conn.create_receiver("poison.q", name="plain", handler=raw, credit=20)  # noqa: F841 - kept open
    conn.wait(lambda: len(raw.got) >= 1 + len(POISON), msg="the rest")
    assert sorted(raw.got) == sorted([skipped, *POISON.values()])
    sync(conn)
    assert queues(broker.url)["poison.q"]["messages"] == 0
    conn.close()


# -- defect 14: every destination of a composite or a divert applies its address-full policy ----------
FULL_POLICIES = """
[[address_settings]]
match = "fail.#"
max_size_bytes = 1000
address_full_policy = "fail"

[[address_settings]]
match = "drop.#"
max_size_bytes = 1000
address_full_policy = "drop"

[[address_settings]]
match = "block.#"
max_size_bytes = 1000
address_full_policy = "block"

[[divert]]
name = "to-fail"
address = "src.fail"
forwarding_address = "fail.div"

[[divert]]
name = "to-drop"
address = "src.drop"
forwarding_address = "drop.div"
"""


def _fill(conn, address: str) -> None:
    """One message over the address's limit: it is full from then on."""
    conn.create_sender(address).send(Message(body=b"x" * 1500))


def _messages(url: str, name: str) -> int:
    return queues(url).get(name, {}).get("messages", 0)


def test_a_full_fail_destination_refuses_the_whole_composite_or_diverted_send(start_broker):
    b = start_broker(config=FULL_POLICIES)
    conn = connect(b.url)
    _fill(conn, "fail.b")
    d = conn.create_sender("plain.a,fail.b").send(Message(body="both"), error_states=[])
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:resource-limit-exceeded"
    assert "fail.b" in d.remote.condition.description
    conn.create_receiver("src.fail", name="keep").close()  # the source has its own queue
    _fill(conn, "fail.div")
    d = conn.create_sender("src.fail").send(Message(body="diverted"), error_states=[])
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:resource-limit-exceeded"
    sync(conn)
    assert (_messages(b.url, "plain.a"), _messages(b.url, "fail.b"), _messages(b.url, "fail.div")) == (0, 1, 1)
    conn.close()


def test_a_full_drop_destination_drops_only_its_copy(start_broker):
    b = start_broker(config=FULL_POLICIES)
    conn = connect(b.url)
    _fill(conn, "drop.b")
    assert conn.create_sender("plain.c,drop.b").send(Message(body="c")).remote_state == Delivery.ACCEPTED
    _fill(conn, "drop.div")
    assert conn.create_sender("src.drop").send(Message(body="d")).remote_state == Delivery.ACCEPTED
    sync(conn)
    assert (_messages(b.url, "plain.c"), _messages(b.url, "drop.b"), _messages(b.url, "drop.div")) == (1, 1, 1)
    conn.close()


def test_a_full_block_part_of_a_composite_withholds_the_producers_credit(start_broker):
    b = start_broker(config=FULL_POLICIES)
    conn = connect(b.url)
    _fill(conn, "block.b")
    sender_conn = connect(b.url)
    sender = sender_conn.create_sender("plain.e,block.b")
    total = 1100
    t, done, errors = send_in_background(sender, range(total))
    wait_for(lambda: _messages(b.url, "plain.e") >= 1000, timeout=30)
    assert not done.is_set() and _messages(b.url, "plain.e") < total  # out of credit
    assert receive_bodies(conn.create_receiver("block.b", credit=200), total + 1, timeout=30)[0] == b"x" * 1500
    assert done.wait(30) and not errors
    t.join()
    assert _messages(b.url, "plain.e") == total
    sender_conn.close()
    conn.close()
