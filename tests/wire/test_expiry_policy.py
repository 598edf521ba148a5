"""Terminus expiry policy and timeout (AMQP 1.0 §3.5.3) for non-durable subscriptions and
dynamic nodes: an abandoned one goes when its policy (link-detach, session-end,
connection-close, never) and timeout say, and not before; a re-attach (same container id and
link name, or the dynamic node's address) within the timeout resumes it with what arrived
meanwhile. `hermod queue stat` flags subscriptions that have no consumer."""
from __future__ import annotations

import subprocess
import sys
import time

from proton import Message, Terminus
from proton.reactor import LinkOption

from hermod_testing import wait_for
from wire_helpers import Caps, Dynamic, connect, receive_bodies, sync, topic

POLICIES = {"link-detach": Terminus.EXPIRE_WITH_LINK, "session-end": Terminus.EXPIRE_WITH_SESSION,
            "connection-close": Terminus.EXPIRE_WITH_CONNECTION, "never": Terminus.EXPIRE_NEVER}


class Expiry(LinkOption):
    def __init__(self, policy: str, timeout: int = 0):
        self.policy = POLICIES[policy]
        self.timeout = timeout

    def apply(self, link) -> None:
        link.source.expiry_policy = self.policy
        link.source.timeout = self.timeout


def queues_of(broker, address: str) -> dict:
    from hermod.broker.tools.clients import management_call
    return {r["queue"]: r for r in management_call(broker.url, "queue.stat") if r["address"] == address}


def detach(conn, receiver) -> None:
    """Detach (closed=false) and wait until the broker has handled it (a later round trip
    is answered after it)."""
    receiver.link.detach()
    sync(conn)


def subscribe_on_own_session(conn, address: str, policy: str):
    """A receiving link on a session of its own (BlockingConnection shares one): (session, link)."""
    session = conn.conn.session()
    session.open()
    link = session.receiver("sub")
    link.source.address = address
    link.source.expiry_policy = POLICIES[policy]
    link.open()
    conn.wait(lambda: link.state & link.REMOTE_ACTIVE, msg="attached")
    return session, link


def publish(broker, address: str, bodies) -> None:
    conn = connect(broker.url)
    sender = conn.create_sender(address, options=[Caps("topic", on="target")])
    for body in bodies:
        sender.send(Message(body=body))
    conn.close()


def test_link_detach_with_timeout_keeps_the_subscription_until_it_runs_out(broker):
    conn = connect(broker.url, container_id="exp-ld")
    r = conn.create_receiver("exp.ld", name="sub", options=[topic(), Expiry("link-detach", 2)])
    detach(conn, r)
    detached = time.monotonic()
    [queue] = queues_of(broker, "exp.ld")
    assert queues_of(broker, "exp.ld")[queue]["consumers"] == 0
    wait_for(lambda: not queues_of(broker, "exp.ld"), timeout=10, message="the subscription expired")
    assert time.monotonic() - detached >= 1.9  # not before its timeout
    conn.close()


def test_reattach_within_the_timeout_resumes_the_subscription(broker):
    conn = connect(broker.url, container_id="exp-resume")
    r = conn.create_receiver("exp.resume", name="sub", options=[topic(), Expiry("link-detach", 30)])
    publish(broker, "exp.resume", ["before"])
    assert receive_bodies(r, 1) == ["before"]
    detach(conn, r)
    publish(broker, "exp.resume", ["while away 1", "while away 2"])
    [queue] = queues_of(broker, "exp.resume")
    again = conn.create_receiver("exp.resume", name="sub", options=[topic(), Expiry("link-detach", 30)])
    assert receive_bodies(again, 2) == ["while away 1", "while away 2"]
    assert list(queues_of(broker, "exp.resume")) == [queue]  # the same subscription queue
    conn.close()


def test_a_timeout_of_zero_under_link_detach_ends_it_at_the_detach(broker):
    conn = connect(broker.url, container_id="exp-zero")
    r = conn.create_receiver("exp.zero", name="sub", options=[topic(), Expiry("link-detach")])
    assert queues_of(broker, "exp.zero")
    detach(conn, r)
    assert not queues_of(broker, "exp.zero")
    conn.close()


def test_session_end_keeps_a_detached_subscription_until_its_session_ends(broker):
    conn = connect(broker.url, container_id="exp-se")
    session, link = subscribe_on_own_session(conn, "topic://exp.se", "session-end")
    link.detach()
    sync(conn)
    assert queues_of(broker, "exp.se"), "kept while its session lives"
    session.close()
    conn.wait(lambda: session.state & session.REMOTE_CLOSED, msg="end answered")
    wait_for(lambda: not queues_of(broker, "exp.se"), message="gone with its session")
    conn.close()


def test_connection_close_keeps_it_past_its_session_until_the_connection_closes(broker):
    conn = connect(broker.url, container_id="exp-cc")
    session, _ = subscribe_on_own_session(conn, "topic://exp.cc", "connection-close")
    session.close()
    conn.wait(lambda: session.state & session.REMOTE_CLOSED, msg="end answered")
    sync(conn)
    assert queues_of(broker, "exp.cc"), "kept while its connection lives"
    conn.close()
    wait_for(lambda: not queues_of(broker, "exp.cc"), message="gone with its connection")


def test_never_keeps_it_after_the_connection_and_a_new_connection_resumes_it(broker):
    conn = connect(broker.url, container_id="exp-never")
    conn.create_receiver("exp.never", name="sub", options=[topic(), Expiry("never")])
    conn.close()
    publish(broker, "exp.never", ["kept for you"])
    assert queues_of(broker, "exp.never")
    back = connect(broker.url, container_id="exp-never")
    r = back.create_receiver("exp.never", name="sub", options=[topic(), Expiry("never")])
    assert receive_bodies(r, 1) == ["kept for you"]
    back.close()


def test_closing_the_link_ends_it_whatever_the_policy(broker):
    conn = connect(broker.url, container_id="exp-close")
    r = conn.create_receiver("exp.close", name="sub", options=[topic(), Expiry("never", 60)])
    r.close()
    sync(conn)
    assert not queues_of(broker, "exp.close")
    conn.close()


def test_a_dynamic_node_lingers_for_its_timeout_and_is_resumed_by_its_address(broker):
    conn = connect(broker.url)
    r = conn.create_receiver(None, dynamic=True, credit=0, options=[Expiry("link-detach", 30)])
    address = r.link.remote_source.address
    sender = conn.create_sender(address)
    sender.send(Message(body="waiting on the temporary queue"))
    sender.close()
    detach(conn, r)
    again = conn.create_receiver(address)
    assert receive_bodies(again, 1) == ["waiting on the temporary queue"]
    conn.close()


def test_a_dynamic_node_goes_when_its_timeout_runs_out(broker):
    conn = connect(broker.url)
    r = conn.create_receiver(None, dynamic=True, options=[Expiry("link-detach", 1)])
    address = r.link.remote_source.address
    detach(conn, r)
    assert queues_of(broker, address)
    wait_for(lambda: not queues_of(broker, address), message="the dynamic node expired")
    conn.close()


def test_a_dynamic_node_under_the_default_policy_goes_with_its_connection(broker):
    conn = connect(broker.url)
    r = conn.create_receiver(None, options=[Dynamic()])
    address = r.link.remote_source.address
    assert queues_of(broker, address)
    conn.close()
    wait_for(lambda: not queues_of(broker, address), message="gone with the connection")


def test_queue_stat_flags_a_subscription_with_no_consumer(broker):
    conn = connect(broker.url, container_id="exp-stat")
    r = conn.create_receiver("exp.stat", name="sub", options=[topic(), Expiry("never")])
    queue_row = lambda: next(line.split() for line in stat().splitlines()[1:] if line.split()[0] == "exp.stat")  # noqa: E731

    def stat() -> str:
        out = subprocess.run([sys.executable, "-m", "hermod.broker", "queue", "stat", "--url", broker.url],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert stat().splitlines()[0].split()[:8] == ["address", "queue", "routing_type", "durable", "messages",
                                                 "consumers", "added", "acked"]
    assert queue_row()[5:] == ["1", "0", "0"]  # in use: no flag
    detach(conn, r)
    row = queue_row()
    assert row[2:] == ["multicast", "false", "0", "0", "0", "0", "no-consumer"]
    assert queues_of(broker, "exp.stat")[row[1]]["no_consumer"] is True
    conn.close()
