"""A producer link's durable sends of one reactor turn are stored as ONE journal unit
(`core.bursts`): the unlucky cases of such a burst, through a real broker process.

The client is hand-framed (amqp_frames) so that a burst is what the broker reads: every
transfer of a burst leaves in one write, on an anonymous link whose messages name their queue
(`to`), half to one queue and half to another. The store is made to wait while the burst is in
the journal: SQLite held by an exclusive lock, PostgreSQL stopped (a cluster of this module's
own). What must hold, as for sends stored one by one: no outcome before the store has the
burst; then each send accepted (stored, in order per queue, surviving a SIGKILL) or rejected
with its own condition: `amqp:not-found` for the sends to a queue deleted while the burst was
being stored, "not stored ... unreachable" for every send of a burst that outlasts the store's
give-up time, and nothing of it stored."""
from __future__ import annotations

import re
import struct
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from proton import Described, Message, ulong, uint

from amqp_frames import ATTACH, DISPOSITION, FLOW, TRANSFER, FrameClient, encode, frame, settled_count
from durable_clients import HeldSqlite, body_of, receive_exactly, require_postgresql
from hermod.broker.tools.clients import management_call
from hermod_testing import wait_for
from pgcluster import PgCluster

QUEUES = """
[[address]]
name = "burst.keep"
routing = ["anycast"]
  [[address.queue]]
  name = "burst.keep"
  routing = "anycast"

[[address]]
name = "burst.gone"
routing = ["anycast"]
  [[address.queue]]
  name = "burst.gone"
  routing = "anycast"
"""
ACCEPTED, REJECTED = 0x24, 0x25
TARGET = 0x29
GIVE_UP_S = "1"


def http_base(broker) -> str:
    return next(m.group(1) for line in broker.stdout_lines
                if (m := re.search(r"hermod http on (https?://\S+)", line)))


def journal_depth(broker) -> int:
    with urllib.request.urlopen(http_base(broker) + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return int(re.search(r"^hermod_journal_depth (\d+)$", text, re.M).group(1))


def delete_queue(broker, name: str) -> int:
    """Over HTTP (an AMQP management reply would be routed, and so wait behind the burst: a
    non-durable message waits for the durable ones before it, to keep their order); answered
    once the store has the deletion."""
    request = urllib.request.Request(f"{http_base(broker)}/api/queues/{name}", method="DELETE",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.status


def queue_exists(broker, name: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http_base(broker)}/api/queues/{name}", timeout=10):
            return True
    except urllib.error.HTTPError as e:
        assert e.code == 404, e
        return False


class BurstSender:
    """One connection, one anonymous sending link; `send_burst` writes every transfer at once,
    `outcomes` reads the broker's dispositions."""

    def __init__(self, broker):
        self.client = FrameClient(broker.address)
        self.client.handshake()
        self.client.begin(0)
        self.client.send(0, ATTACH, ["burst", uint(0), False, None, None,
                                     Described(ulong(0x28), [None]), Described(ulong(TARGET), [None]),
                                     None, None, uint(0)])
        self.client.expect(ATTACH)
        self.client.expect(FLOW)
        self.sent = 0

    def send_burst(self, messages: list[Message]) -> None:
        first = self.sent
        self.client.sock.sendall(b"".join(
            frame(0, encode(TRANSFER, [uint(0), uint(first + i), struct.pack(">I", first + i), uint(0),
                                       False, False]) + m.encode())
            for i, m in enumerate(messages)))
        self.sent += len(messages)

    def outcomes(self, count: int, timeout: float = 30) -> dict[int, tuple[int, str | None, str | None]]:
        """Delivery id -> (outcome code, condition, description) for `count` settled deliveries
        (`timeout`: for each frame; the store's retries back off up to 2 s)."""
        got: dict[int, tuple[int, str | None, str | None]] = {}
        while len(got) < count:
            f = self.client.read(timeout)
            if f.code != DISPOSITION:
                continue
            first = int(f.fields[1])
            last = int(f.fields[2]) if f.fields[2] is not None else first
            assert settled_count(f) == last - first + 1
            state = f.fields[4]
            condition = description = None
            if int(state.descriptor) == REJECTED and state.value and state.value[0] is not None:
                error = state.value[0].value
                condition, description = str(error[0]), error[1]
            for delivery_id in range(first, last + 1):
                got[delivery_id] = (int(state.descriptor), condition, description)
        return got

    def nothing_settled(self) -> bool:
        return not any(f.code == DISPOSITION for _, f in self.client.received)

    def close(self) -> None:
        self.client.close()


def mixed_burst(count: int, tag: str) -> list[Message]:
    """Even sends to burst.keep, odd ones to burst.gone."""
    return [Message(address="burst.keep" if n % 2 == 0 else "burst.gone", body=f"{tag}-{n}", durable=True)
            for n in range(count)]


# -- how the store is made to wait -------------------------------------------------------------


class StoppedPostgres:
    def __init__(self, cluster: PgCluster, name: str):
        self.cluster = cluster
        self.url = cluster.create_database(name)

    def stop(self) -> None:
        self.cluster.stop()

    def start(self) -> None:
        if not self.cluster.running:
            self.cluster.start()


@pytest.fixture(scope="module")
def _module_cluster():
    require_postgresql()
    with PgCluster(durable=False) as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "postgresql"])
def outage(request, tmp_path):
    if request.param == "sqlite":
        store = HeldSqlite(tmp_path)
    else:
        cluster = request.getfixturevalue("_module_cluster")
        if not cluster.running:
            cluster.start()
        store = StoppedPostgres(cluster, re.sub(r"\W", "_", request.node.name)[:40].lower())
    yield store
    store.start()


# -- the tests -----------------------------------------------------------------------------------


def test_a_burst_waits_for_the_store_then_is_accepted_and_survives_a_sigkill(outage, start_broker):
    broker = start_broker(config=QUEUES, store=outage.url)
    sender = BurstSender(broker)
    count = 200
    outage.stop()
    try:
        sender.send_burst(mixed_burst(count, "b"))
        wait_for(lambda: journal_depth(broker) == count, message="the burst in the journal")
        assert sender.nothing_settled()  # no `accepted` before the store has the burst
    finally:
        outage.start()
    outcomes = sender.outcomes(count)
    assert [outcomes[n][0] for n in range(count)] == [ACCEPTED] * count
    sender.close()

    broker.kill()  # SIGKILL: every accepted send is stored, in order per queue
    broker = start_broker(config=QUEUES, store=outage.url)
    assert [body_of(m) for m in receive_exactly(broker.url, "burst.keep", count // 2)] == [
        f"b-{n}" for n in range(0, count, 2)]
    assert [body_of(m) for m in receive_exactly(broker.url, "burst.gone", count // 2)] == [
        f"b-{n}" for n in range(1, count, 2)]


def test_a_burst_outlasting_the_give_up_time_is_rejected_whole_and_nothing_of_it_is_stored(
        outage, start_broker):
    broker = start_broker(config=QUEUES, store=outage.url, env={"HERMOD_STORE_GIVE_UP_S": GIVE_UP_S})
    sender = BurstSender(broker)
    count = 50
    outage.stop()
    try:
        sender.send_burst(mixed_burst(count, "lost"))
        outcomes = sender.outcomes(count)
    finally:
        outage.start()
    assert [outcomes[n][0] for n in range(count)] == [REJECTED] * count
    for _, condition, description in outcomes.values():
        assert condition == "amqp:internal-error"
        assert "not stored" in description and "unreachable" in description
    sender.send_burst([Message(address="burst.keep", body="after", durable=True)])
    assert sender.outcomes(1)[count][0] == ACCEPTED  # the broker resumes
    sender.close()

    broker.kill()
    broker = start_broker(config=QUEUES, store=outage.url)
    assert [body_of(m) for m in receive_exactly(broker.url, "burst.keep", 1)] == ["after"]
    assert [r["messages"] for r in management_call(broker.url, "queue.stat")
            if r["queue"] == "burst.gone"] == [0]


def test_sends_to_a_queue_deleted_while_their_burst_is_stored_are_refused_alone(tmp_path, start_broker):
    store = HeldSqlite(tmp_path)
    broker = start_broker(config=QUEUES, store=store.url)
    sender = BurstSender(broker)
    count = 40
    store.stop()
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            sender.send_burst(mixed_burst(count, "d"))
            wait_for(lambda: journal_depth(broker) == count, message="the burst in the journal")
            deleting = pool.submit(delete_queue, broker, "burst.gone")
            wait_for(lambda: not queue_exists(broker, "burst.gone"), message="the queue gone from the broker")
            assert sender.nothing_settled()
        finally:
            store.start()
        assert deleting.result(timeout=30) == 204  # the deletion stored: it stays after kill -9
    outcomes = sender.outcomes(count)
    assert [outcomes[n][0] for n in range(0, count, 2)] == [ACCEPTED] * (count // 2)
    refused = [outcomes[n] for n in range(1, count, 2)]
    assert [(code, condition) for code, condition, _ in refused] == [
        (REJECTED, "amqp:not-found")] * (count // 2)
    assert all("burst.gone" in description for _, _, description in refused)
    sender.close()

    broker.kill()
    broker = start_broker(config=QUEUES.split("[[address]]\nname = \"burst.gone\"")[0], store=store.url)
    assert [body_of(m) for m in receive_exactly(broker.url, "burst.keep", count // 2)] == [
        f"d-{n}" for n in range(0, count, 2)]
    assert "burst.gone" not in {r["queue"] for r in management_call(broker.url, "queue.stat")}
