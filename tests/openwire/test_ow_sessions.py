"""OpenWire durable subscriptions (shared with AMQP by name), local transactions, temporary
destinations with their advisories, and AMQP -> OpenWire messages, with the real Classic client."""
from __future__ import annotations

import queue
import sys
from pathlib import Path
from urllib.parse import unquote_plus

import pytest
from owclient import JmsError, OwClient
from proton import Message
from test_ow_basic import port_of, receive_all
from wire_helpers import DurableSubscription, connect, topic

from hermod.broker.security.passwords import hash_password
from hermod_testing import wait_for


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker()


@pytest.fixture
def client(broker):
    made: list[OwClient] = []

    def make(options: str = "", **login) -> OwClient:
        c = OwClient(port_of(broker), options)
        made.append(c)
        c.connect(**login)
        return c

    yield make
    for c in made:
        c.close()


def test_durable_subscription_keeps_messages_while_away_and_unsubscribe_removes_it(client):
    c = client(client_id="owcid")
    c("session", "s", "false", "auto")
    c("consumer", "d", "s", "topic:ow.prices", "durable=ticker")
    c("closeconsumer", "d")
    c("producer", "p", "s", "topic:ow.prices", "persistent")
    c("send", "p", "text", "while-away")
    c("consumer", "d", "s", "topic:ow.prices", "durable=ticker")
    assert c.receive("d")["body"] == "while-away"
    with pytest.raises(JmsError):
        c("unsubscribe", "s", "ticker")  # in use
    c("closeconsumer", "d")
    c("unsubscribe", "s", "ticker")
    c("send", "p", "text", "after")
    c("consumer", "d", "s", "topic:ow.prices", "durable=ticker")
    assert c.receive("d", 300) is None  # a new subscription: nothing kept for it
    c("closeconsumer", "d")
    c("unsubscribe", "s", "ticker")
    with pytest.raises(JmsError) as e:
        c("unsubscribe", "s", "ticker")
    assert e.value.java_class == "javax.jms.InvalidDestinationException"


def test_durable_subscription_without_client_id_is_refused(client):
    c = client()
    c("session", "s", "false", "auto")
    with pytest.raises(JmsError):
        c("consumer", "d", "s", "topic:ow.noid", "durable=x")


def test_openwire_durable_subscription_resumed_over_amqp_and_back(broker, client):
    c = client(client_id="shared1")
    c("session", "s", "false", "auto")
    c("consumer", "d", "s", "topic:ow.shared", "durable=sub")
    c("closeconsumer", "d")
    c("producer", "p", "s", "topic:ow.shared", "persistent")
    c("send", "p", "text", "one")
    conn = connect(broker.url, container_id="shared1")
    try:
        r = conn.create_receiver("ow.shared", name="sub", options=[topic(), DurableSubscription()])
        m = r.receive(timeout=10)
        r.accept()
        assert m.body == "one"
        r.detach()  # detached, not closed: the subscription stays
    finally:
        conn.close()
    c("send", "p", "text", "two")
    c("consumer", "d", "s", "topic:ow.shared", "durable=sub")
    assert c.receive("d")["body"] == "two"


def test_amqp_durable_subscription_resumed_over_openwire(broker, client):
    conn = connect(broker.url, container_id="shared2")
    try:
        conn.create_receiver("ow.shared2", name="sub", options=[topic(), DurableSubscription()]).detach()
        s = conn.create_sender("topic://ow.shared2")
        s.send(Message(body="from-amqp", durable=True))
    finally:
        conn.close()
    c = client(client_id="shared2")
    c("session", "s", "false", "auto")
    c("consumer", "d", "s", "topic:ow.shared2", "durable=sub")
    assert c.receive("d")["body"] == "from-amqp"


def test_transacted_sends_appear_only_at_commit_and_rollback_drops_them(client):
    c = client()
    c("session", "t", "true", "auto")
    c("session", "a", "false", "auto")
    c("producer", "p", "t", "queue:ow.tx", "persistent")
    c("consumer", "c", "a", "queue:ow.tx")
    c("send", "p", "text", "a1")
    c("send", "p", "text", "a2")
    assert c.receive("c", 300) is None
    c("commit", "t")
    assert [m["body"] for m in receive_all(c, "c", 2)] == ["a1", "a2"]
    c("send", "p", "text", "gone")
    c("rollback", "t")
    c("send", "p", "text", "a3")
    c("commit", "t")
    assert c.receive("c")["body"] == "a3"
    assert c.receive("c", 300) is None


def test_transacted_receive_rolled_back_is_redelivered_and_committed_is_gone(client):
    c = client()
    c("session", "a", "false", "auto")
    c("session", "t", "true", "auto")
    c("producer", "p", "a", "queue:ow.txr", "persistent")
    c("send", "p", "text", "r1")
    c("consumer", "c", "t", "queue:ow.txr")
    assert c.receive("c")["body"] == "r1"
    c("rollback", "t")
    m = c.receive("c")
    assert (m["body"], m["redelivered"]) == ("r1", "true")
    c("commit", "t")
    c("closesession", "t")
    c("consumer", "again", "a", "queue:ow.txr")
    assert c.receive("again", 300) is None


def test_temporary_queue_reply_from_another_connection_and_its_advisory(client):
    requester = client()
    requester("session", "s", "false", "auto")
    requester("consumer", "adv", "s", "topic:ActiveMQ.Advisory.TempQueue")
    shown = requester("tempqueue", "reply", "s")
    assert shown.startswith("tempqueue:")
    advisory = requester.receive("adv")
    assert advisory["kind"] == "message" and advisory["type"] == "Advisory"
    requester("consumer", "r", "s", "temp:reply")
    requester("producer", "p", "s", "queue:ow.requests", "persistent")
    requester("send", "p", "text", "ping", "replyto=temp:reply")

    responder = client()
    responder("session", "s", "false", "auto")
    responder("consumer", "c", "s", "queue:ow.requests")
    request = responder.receive("c")
    assert request["replyto"] == unquote_plus(shown)
    responder("reply", "c", "s", "pong")
    assert requester.receive("r")["body"] == "pong"
    requester("closeconsumer", "r")
    requester("deletetemp", "reply")
    assert requester.receive("adv")["type"] == "Advisory"  # the removal


def test_amqp_producer_to_openwire_consumer_keeps_types_and_headers(broker, client):
    c = client()
    c("session", "s", "false", "auto")
    c("consumer", "c", "s", "queue:ow.fromamqp")
    conn = connect(broker.url)
    try:
        s = conn.create_sender("ow.fromamqp")
        s.send(Message(body="text-body", correlation_id="corr-1", subject="jtype", priority=8, durable=True,
                       reply_to="ow.replies", group_id="grp", properties={"i": 7, "b": True, "d": 1.5}))
        s.send(Message(body=b"\x01\x02"))
        s.send(Message(body={"k": "v", "n": 3}))
        s.send(Message(body=["x", 2]))
    finally:
        conn.close()
    text, data, mapped, seq = receive_all(c, "c", 4)
    assert (text["kind"], text["body"], text["corr"], text["type"], text["prio"], text["group"]) == (
        "text", "text-body", "corr-1", "jtype", "8", "grp")
    assert text["mode"] == "2"
    assert text["replyto"] == "queue:ow.replies"
    assert (text["prop.i"], text["prop.b"], text["prop.d"]) == ("long:7", "boolean:true", "double:1.5")
    assert text["id"].startswith("ID:")
    assert (data["kind"], data["body"]) == ("bytes", "0102")
    assert (mapped["kind"], mapped["body"]) == ("map", "k=string:v;n=long:3;")
    assert (seq["kind"], seq["body"]) == ("stream", "string:x;int:2;")


def test_wrong_password_is_a_jms_security_exception(start_broker):
    b = start_broker(config='[security]\nanonymous = false\n[[security.user]]\nname = "alice"\n'
                            f'password_hash = "{hash_password("secret", iterations=64)}"\nroles = ["admin"]\n')
    c = OwClient(port_of(b))
    try:
        with pytest.raises(JmsError) as e:
            c.connect(user="alice", password="wrong")
        assert e.value.java_class == "javax.jms.JMSSecurityException"
        with pytest.raises(JmsError) as e:
            c.connect()
        assert e.value.java_class == "javax.jms.JMSSecurityException"
    finally:
        c.close()
    ok = OwClient(port_of(b))
    try:
        ok.connect(user="alice", password="secret")
        ok("session", "s", "false", "auto")
        ok("producer", "p", "s", "queue:ow.secure", "persistent")
        ok("send", "p", "text", "in")
        ok("consumer", "c", "s", "queue:ow.secure")
        assert ok.receive("c")["body"] == "in"
    finally:
        ok.close()
    wait_for(lambda: any("login_failed" in line or "login failed" in line for line in b.stderr_lines),
             timeout=10, message="the failed login is logged")


POLICIES = """
[[address_settings]]
match = "full.fail.#"
max_size_bytes = 3000
address_full_policy = "fail"

[[address_settings]]
match = "full.block.#"
max_size_bytes = 3000
address_full_policy = "block"

[[address_settings]]
match = "noauto.#"
auto_create_addresses = false
auto_create_queues = false
"""


PAD = "." * 400


def test_full_address_fail_is_resource_allocation_and_block_withholds_the_answer(start_broker):
    b = start_broker(config=POLICIES)
    c = OwClient(port_of(b))
    blocked = OwClient(port_of(b))
    try:
        c.connect()
        c("session", "s", "false", "auto")
        c("producer", "p", "s", "queue:full.fail.q", "persistent")
        refused = None
        for i in range(20):
            try:
                c("send", "p", "text", "x" * 500)
            except JmsError as e:
                refused = e
                break
        assert refused is not None and refused.java_class == "javax.jms.ResourceAllocationException"
        with pytest.raises(JmsError) as e:
            c("producer", "n", "s", "queue:noauto.missing", "persistent")
            c("send", "n", "text", "x")
        assert e.value.java_class == "javax.jms.InvalidDestinationException"

        blocked.connect()
        blocked("session", "s", "false", "auto")
        blocked("producer", "p", "s", "queue:full.block.q", "persistent")
        answered = 0
        while answered < 20:  # until the address is full: that send's answer is withheld
            blocked.proc.stdin.write(f"send p text y{answered}{PAD}\n")
            blocked.proc.stdin.flush()
            try:
                assert blocked.lines.get(timeout=1.5).startswith("OK")
            except queue.Empty:
                break
            answered += 1
        assert 0 < answered < 20
        c("consumer", "drain", "s", "queue:full.block.q")
        bodies = [c.receive("drain")["body"] for _ in range(answered + 1)]
        assert bodies == [f"y{i}{PAD}" for i in range(answered + 1)]
        assert blocked.lines.get(timeout=10).startswith("OK")  # answered once it was stored
    finally:
        c.close()
        blocked.close()


def test_answered_persistent_sends_and_durable_subscriptions_survive_a_broker_kill(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'ow.db'}"
    b = start_broker(store=store)
    c = OwClient(port_of(b))
    try:
        c.connect(client_id="survivor")
        c("session", "s", "false", "auto")
        c("consumer", "d", "s", "topic:ow.kept", "durable=sub")
        c("closeconsumer", "d")
        c("producer", "p", "s", "queue:ow.kept", "persistent")
        c("producer", "t", "s", "topic:ow.kept", "persistent")
        for i in range(5):
            c("send", "p", "text", f"k{i}")
        c("send", "t", "text", "for-sub")
    finally:
        c.kill()
    b.kill()
    b = start_broker(store=store)
    c = OwClient(port_of(b))
    try:
        c.connect(client_id="survivor")
        c("session", "s", "false", "auto")
        c("consumer", "q", "s", "queue:ow.kept")
        assert [m["body"] for m in receive_all(c, "q", 5)] == [f"k{i}" for i in range(5)]
        c("consumer", "d", "s", "topic:ow.kept", "durable=sub")
        assert c.receive("d")["body"] == "for-sub"
    finally:
        c.close()


def test_a_connection_dropped_mid_transaction_leaves_nothing_behind(client):
    c = client()
    c("session", "t", "true", "auto")
    c("producer", "p", "t", "queue:ow.midtx", "persistent")
    c("send", "p", "text", "never")
    c.kill()
    d = client()
    d("session", "s", "false", "auto")
    d("consumer", "c", "s", "queue:ow.midtx")
    assert d.receive("c", 500) is None


def test_no_local_subscriber_does_not_get_its_own_connections_messages(client):
    c = client()
    other = client()
    c("session", "s", "false", "auto")
    c("consumer", "mine", "s", "topic:ow.nolocal", "nolocal")
    c("producer", "p", "s", "topic:ow.nolocal", "persistent")
    c("send", "p", "text", "own")
    other("session", "s", "false", "auto")
    other("producer", "p", "s", "topic:ow.nolocal", "persistent")
    other("send", "p", "text", "theirs")
    assert c.receive("mine")["body"] == "theirs"
    assert c.receive("mine", 300) is None


def test_an_openwire_only_listener_serves_the_java_client(start_broker):
    b = start_broker(config='[[listener]]\nname = "ow"\nport = 0\nprotocols = ["openwire"]\n')
    line = next(x for x in b.stdout_lines if "hermod listener ow on" in x)
    assert "openwire://" in line
    port = int(line.strip().rsplit(":", 1)[1])
    c = OwClient(port)
    try:
        c.connect()
        c("session", "s", "false", "auto")
        c("producer", "p", "s", "queue:ow.listener", "persistent")
        c("send", "p", "text", "via-listener")
        c("consumer", "c", "s", "queue:ow.listener")
        assert c.receive("c")["body"] == "via-listener"
    finally:
        c.close()


def test_xa_prepare_outlives_its_connection_and_recover_lists_it_then_commit(broker):
    """XAResource over OpenWire: work inside a branch is invisible until commit; a prepared branch
    is listed by RECOVER from another connection, which commits it (two-phase)."""
    port = port_of(broker)
    c = OwClient(port)
    other = OwClient(port)
    watcher = OwClient(port)
    try:
        c("xaconnect", c.url.replace(":", "%3A").replace("/", "%2F"))
        c("xasession", "x")
        c("producer", "p", "x", "queue:ow.xa", "persistent")
        c("xastart", "x", "g1")
        c("send", "p", "text", "xa-1")
        c("xaend", "x", "g1")
        assert c("xaprepare", "x", "g1") == "0"  # XA_OK
        c("xastart", "x", "g2")
        c("send", "p", "text", "xa-2")
        c("xaend", "x", "g2")
        c("xacommit", "x", "g2", "true")  # one phase
        c("xastart", "x", "g3")
        c("xaend", "x", "g3")
        assert c("xaprepare", "x", "g3") == "3"  # XA_RDONLY: nothing to commit
        watcher.connect()
        watcher("session", "s", "false", "auto")
        watcher("consumer", "w", "s", "queue:ow.xa")
        assert watcher.receive("w")["body"] == "xa-2"
        assert watcher.receive("w", 300) is None  # g1 prepared, not committed
        c.kill()  # the prepared branch outlives its connection
        other("xaconnect", other.url.replace(":", "%3A").replace("/", "%2F"))
        other("xasession", "x")
        assert other("xarecover", "x") == "g1"
        other("xacommit", "x", "g1", "false")
        assert watcher.receive("w")["body"] == "xa-1"
        assert other("xarecover", "x") == ""
    finally:
        c.close()
        other.close()
        watcher.close()


def test_xa_rollback_of_a_prepared_branch_drops_its_sends(broker):
    c = OwClient(port_of(broker))
    try:
        c("xaconnect", c.url.replace(":", "%3A").replace("/", "%2F"))
        c("xasession", "x")
        c("producer", "p", "x", "queue:ow.xarb", "persistent")
        c("xastart", "x", "r1")
        c("send", "p", "text", "gone")
        c("xaend", "x", "r1")
        assert c("xaprepare", "x", "r1") == "0"
        c("xarollback", "x", "r1")
        c("session", "s", "false", "auto")
        c("consumer", "w", "s", "queue:ow.xarb")
        assert c.receive("w", 300) is None
        assert c("xarecover", "x") == ""
    finally:
        c.close()


def test_openwire_connections_are_listed_and_closed_by_management(broker):
    sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
    from http_helpers import call, http_url
    base = http_url(broker)
    c = OwClient(port_of(broker))
    try:
        c.connect(client_id="listed-ow")
        c("session", "s", "false", "auto")
        c("consumer", "c", "s", "queue:ow.listed")
        status, conns = call(base, "GET", "/api/connections")
        mine = next(x for x in conns if x["container_id"] == "listed-ow")
        assert mine["protocol"] == "openwire" and mine["remote"].startswith("127.0.0.1:")
        assert any(link["address"] == "ow.listed" for link in mine["links"])
        assert call(base, "DELETE", f"/api/connections/{mine['id']}") == (204, None)
        wait_for(lambda: all(x["container_id"] != "listed-ow" for x in call(base, "GET", "/api/connections")[1]),
                 message="the closed connection to leave the list")
        with pytest.raises((JmsError, EOFError)):
            c("producer", "p", "s", "queue:ow.listed", "persistent")
            c("send", "p", "text", "after-close")
    finally:
        c.close()


def test_refused_asynchronous_sends_still_give_the_producer_window_its_room(start_broker):
    """Non-persistent sends under a 4 KiB producer window to a full `fail` address, and to a
    missing one: each refusal is answered with a ProducerAck too, so the producer never blocks."""
    b = start_broker(config=POLICIES)
    c = OwClient(port_of(b), "jms.producerWindowSize=4096")
    try:
        c.connect()
        c("session", "s", "false", "auto")
        c("producer", "p", "s", "queue:full.fail.window", "nonpersistent")
        for i in range(40):
            c("send", "p", "text", f"w{i}{PAD}", timeout=10)
        c("producer", "anon", "s", "-", "nonpersistent")
        for i in range(40):  # refused before routing: no such address, auto-create off
            c("send", "anon", "text", f"n{i}{PAD}", "to=queue:noauto.window", timeout=10)
        c("consumer", "c", "s", "queue:full.fail.window")
        kept = receive_all(c, "c", 1)
        assert kept[0]["body"] == f"w0{PAD}"
    finally:
        c.close()
