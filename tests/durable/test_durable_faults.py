"""Store faults as a broker process meets them.

PostgreSQL stopped under a running broker (a cluster of this module's own, stopped and started
by the tests): durable work waits instead of being confirmed (no false accept, no false ack
confirmation), and completes once the server is back within the journal's `fail_after_s`
(30 s by default; the outage here lasts a few seconds). A store that cannot be used at start
(a corrupt SQLite file, a schema stamped by a newer Hermod, an unreachable PostgreSQL server)
gives one line on stderr and exit status 2.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from proton import Message
from proton.reactor import AtMostOnce, DurableSubscription
from sqlalchemy import text

from durable_clients import (AckingConsumer, AsyncProducer, StoreView, body_of, queue_stats,
                             receive_exactly, require_postgresql, send_durable, sqlite_path,
                             wait_until)
from pgcluster import PgCluster, free_port
from wire_helpers import connect, sync, topic

OUTAGE_WARNING = "unreachable"


def durable(body) -> Message:
    return Message(body=body, durable=True)


def hermod(*args: str, cwd=None, timeout: float = 60, env: dict | None = None
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


def one_line_and_exit_2(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert result.stdout.strip() == ""
    assert lines[0].startswith("hermod: ")
    return lines[0]


# -- PostgreSQL going away under a running broker ---------------------------------------------


@pytest.fixture(scope="module")
def _module_cluster():
    require_postgresql()
    with PgCluster(durable=False) as cluster:
        yield cluster


@pytest.fixture
def outage_cluster(_module_cluster):
    """This module's cluster, running at the start and at the end of each test."""
    if not _module_cluster.running:
        _module_cluster.start()
    yield _module_cluster
    if not _module_cluster.running:
        _module_cluster.start()


def outage_reported(broker) -> bool:
    return any(OUTAGE_WARNING in line and "WARNING" in line for line in broker.stderr_lines)


def test_producer_gets_no_accept_while_postgresql_is_down_and_completes_after(
        outage_cluster, start_broker):
    store_url = outage_cluster.create_database("producer_outage")
    broker = start_broker(store=store_url)
    send_durable(broker.url, "fault.q", [durable("before")])

    outage_cluster.stop()
    count = 20
    producer = AsyncProducer(broker.url, "fault.q",
                             [(i, durable(f"during-{i}")) for i in range(count)]).start()
    wait_until(lambda: len(producer.sent) == count, "the transfers to leave the client")
    wait_until(lambda: outage_reported(broker), "the broker's store-outage warning")
    assert producer.accepted == [] and producer.refused == []  # waiting: no false accept

    outage_cluster.start()
    producer.join(timeout=30)
    assert producer.errors == [] and producer.refused == []
    assert producer.accepted == list(range(count))
    wait_until(lambda: any("reachable again" in line for line in broker.stderr_lines),
               "the broker's store-recovered line")

    # Stored, not just accepted: a SIGKILL later they are all there, in order.
    broker.kill()
    broker = start_broker(store=store_url)
    got = receive_exactly(broker.url, "fault.q", count + 1)
    assert [body_of(m) for m in got] == ["before"] + [f"during-{i}" for i in range(count)]


def test_acknowledgements_are_not_confirmed_while_postgresql_is_down(outage_cluster, start_broker):
    store_url = outage_cluster.create_database("ack_outage")
    broker = start_broker(store=store_url)
    count = 5
    send_durable(broker.url, "fault.acks", [durable(f"a{i}") for i in range(count)])

    outage_cluster.stop()
    consumer = AckingConsumer(broker.url, "fault.acks", key=body_of).start()
    wait_until(lambda: len(consumer.received) == count, "the messages to reach the consumer")
    wait_until(lambda: outage_reported(broker), "the broker's store-outage warning")
    assert consumer.acked == []  # the broker holds the settlements: the acks are not stored

    outage_cluster.start()
    wait_until(lambda: len(consumer.acked) == count, "the acknowledgements to be confirmed")
    consumer.stop()
    consumer.join()
    broker.kill()
    with StoreView(store_url) as store:
        assert store.refs_of("fault.acks") == [] and store.message_count() == 0


def test_durable_subscription_answered_during_an_outage_survives_a_crash(outage_cluster,
                                                                        start_broker):
    """With the store away the race is made deterministic: an attach answered while nothing
    can be committed, followed by a SIGKILL, shows whether the answer waited for the store."""
    store_url = outage_cluster.create_database("subscription_outage")
    broker = start_broker(store=store_url)
    outage_cluster.stop()
    answered = threading.Event()
    failures: list[BaseException] = []

    def subscribe() -> None:
        try:
            conn = connect(broker.url, container_id="cid")
            conn.create_receiver("fault.news", name="sub", options=[DurableSubscription(), topic()])
            answered.set()
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threading.Thread(target=subscribe, daemon=True).start()
    wait_until(lambda: outage_reported(broker) or answered.is_set() or failures,
               "the attach to be answered or the store's outage to be reported")
    if answered.is_set():
        broker.kill()  # answered while nothing could be stored
        outage_cluster.start()
    else:
        outage_cluster.start()
        wait_until(lambda: answered.is_set() or failures, "the attach to be answered")
        broker.kill()
    if failures:
        pytest.skip(f"the broker refused the attach during the outage: {failures[0]}")
    broker = start_broker(store=store_url)
    assert "cid.sub" in queue_stats(broker.url)


# -- outages longer than the journal's fail_after_s --------------------------------------------

# HERMOD_STORE_GIVE_UP_S shortens the journal's fail_after_s (30 s) in the broker process.
FAIL_AFTER_S = 1.0


@pytest.fixture
def short_fail_after() -> dict:
    """`env` for start_broker: the broker's journal gives up on a unit after FAIL_AFTER_S."""
    return {"HERMOD_STORE_GIVE_UP_S": str(FAIL_AFTER_S)}


def test_producer_is_rejected_clearly_when_the_outage_outlasts_fail_after(
        outage_cluster, start_broker, short_fail_after):
    store_url = outage_cluster.create_database("long_outage")
    broker = start_broker(store=store_url, env=short_fail_after)
    send_durable(broker.url, "fault.long", [durable("before")])

    outage_cluster.stop()
    producer = AsyncProducer(broker.url, "fault.long", [(i, durable(f"lost-{i}")) for i in range(3)])
    producer.start()
    producer.join(timeout=FAIL_AFTER_S + 15)
    assert producer.accepted == []
    assert [(key, outcome) for key, outcome, _ in producer.refused] == [
        (0, "rejected"), (1, "rejected"), (2, "rejected")]
    for _, _, description in producer.refused:
        assert "not stored" in description and "unreachable" in description

    outage_cluster.start()
    send_durable(broker.url, "fault.long", [durable("after")])  # the broker resumes
    broker.kill()
    broker = start_broker(store=store_url)
    assert [body_of(m) for m in receive_exactly(broker.url, "fault.long", 2)] == ["before", "after"]


def test_acknowledgement_that_could_not_be_stored_is_not_confirmed(
        outage_cluster, start_broker, short_fail_after):
    store_url = outage_cluster.create_database("long_ack_outage")
    broker = start_broker(store=store_url, env=short_fail_after)
    send_durable(broker.url, "fault.unacked", [durable("a0"), durable("a1")])

    outage_cluster.stop()
    consumer = AckingConsumer(broker.url, "fault.unacked", key=body_of).start()
    wait_until(lambda: len(consumer.received) == 2, "the messages to reach the consumer")
    # The probe's unit is submitted after the acks' units: once it is rejected (after
    # fail_after_s), the acks' units have failed too, and their settlements, if any, were
    # written on this connection before the probe's outcome.
    consumer.probe("fault.probe", durable("probe"))
    wait_until(lambda: consumer.probe_outcome is not None, "the probe's outcome",
               timeout=FAIL_AFTER_S + 15)
    assert consumer.probe_outcome == "rejected"
    confirmed = list(consumer.acked)
    consumer.stop()
    consumer.join()

    outage_cluster.start()
    broker.kill()
    broker = start_broker(store=store_url)
    still_there = [body_of(m) for m in receive_exactly(broker.url, "fault.unacked", 2)]
    assert still_there == ["a0", "a1"]  # the acks were never stored ...
    assert confirmed == []  # ... so the broker must not have confirmed them


READING_CONFIG = """
[[address]]
name = "fault.reading"
routing = ["anycast"]

[[address.queue]]
name = "fault.reading"
routing = "anycast"
durable = true

[[address]]
name = "fault.side"
routing = ["anycast"]

[[address.queue]]
name = "fault.side"
routing = "anycast"
durable = false
"""


def test_connection_keeps_reading_while_its_acknowledgement_is_being_stored(outage_cluster, start_broker):
    """An acknowledgement waiting for the store holds back the broker's answers on that
    connection (contract), not the connection itself: a transfer the same client sends after
    it (to a non-durable queue, which needs no store) is read and routed during the outage.
    The acknowledgement is stored once the server is back: gone after a SIGKILL."""
    store_url = outage_cluster.create_database("reading_outage")
    broker = start_broker(store=store_url, config=READING_CONFIG)
    send_durable(broker.url, "fault.reading", [durable("m0"), durable("m1")])

    client = connect(broker.url)
    receiver = client.create_receiver("fault.reading", credit=1)
    side = client.create_sender("fault.side", options=AtMostOnce())
    assert body_of(receiver.receive(timeout=15)) == "m0"
    outage_cluster.stop()

    def pumped(condition):
        def check() -> bool:
            client.container.timeout = 0.05  # one bounded pass of the client's IO
            client.container.process()
            return condition()
        return check

    receiver.accept()  # its unit waits for the store: the broker warns once it tried to commit it
    wait_until(pumped(lambda: outage_reported(broker)), "the broker's store-outage warning")
    side.link.send(Message(body="after the ack"))  # pre-settled: nothing to wait for
    wait_until(pumped(lambda: queue_stats(broker.url)["fault.side"]["messages"] == 1),
               "the transfer sent after the acknowledgement to be routed")

    outage_cluster.start()
    sync(client)  # answered only once the acknowledgement is stored
    client.close()
    broker.kill()
    broker = start_broker(store=store_url, config=READING_CONFIG)
    assert [body_of(m) for m in receive_exactly(broker.url, "fault.reading", 1)] == ["m1"]


# -- a store that cannot be used at start ------------------------------------------------------


def test_corrupt_sqlite_file_gives_one_line_and_exit_2(tmp_path):
    path = tmp_path / "hermod.db"
    path.write_bytes(b"this is not an SQLite database, whatever its name says\n" * 200)
    result = hermod("run", "--port", "0", "--store", f"sqlite:///{path}", cwd=tmp_path)
    line = one_line_and_exit_2(result)
    assert str(path) in line


def test_truncated_sqlite_store_gives_one_line_and_exit_2(tmp_path):
    """A real store cut short (a disk that lost its tail): not silently re-created."""
    store_url = f"sqlite:///{tmp_path / 'hermod.db'}"
    assert hermod("db", "upgrade", "--store", store_url).returncode == 0
    path = sqlite_path(store_url)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    line = one_line_and_exit_2(hermod("run", "--port", "0", "--store", store_url, cwd=tmp_path))
    assert str(path) in line


def test_schema_from_a_newer_hermod_gives_one_line_and_exit_2(store_url, tmp_path):
    assert hermod("db", "upgrade", "--store", store_url).returncode == 0
    with StoreView(store_url) as store, store.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    line = one_line_and_exit_2(hermod("run", "--port", "0", "--store", store_url, cwd=tmp_path))
    assert "9999" in line and "newer" in line
    # Nothing was changed: the next Hermod still finds its revision.
    with StoreView(store_url) as store:
        assert store.scalar("SELECT version_num FROM alembic_version") == "9999"


def test_unreachable_postgresql_at_start_gives_one_line_and_exit_2(tmp_path):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/hermod"
    line = one_line_and_exit_2(hermod("run", "--port", "0", "--store", url, cwd=tmp_path))
    assert "unreachable" in line or "refused" in line


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
def test_a_bad_store_give_up_time_gives_one_line_and_exit_2(tmp_path, value):
    result = hermod("run", "--port", "0", "--store", f"sqlite:///{tmp_path / 'hermod.db'}",
                    cwd=tmp_path, env={"HERMOD_STORE_GIVE_UP_S": value})
    line = one_line_and_exit_2(result)
    assert "HERMOD_STORE_GIVE_UP_S" in line and repr(value) in line


def _http_base(broker) -> str:
    import re
    for line in broker.stdout_lines:
        m = re.search(r"hermod http on (http://\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("no HTTP listener line")


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _hermod_status(broker):
    import subprocess
    return subprocess.run([sys.executable, "-m", "hermod.broker", "status", "--json", "--url", broker.url],
                          capture_output=True, text=True, timeout=60)


def test_health_and_store_up_tell_the_truth_during_an_outage(outage_cluster, start_broker):
    """Issue 33, finding 5: /health answered 200 `ok` while PostgreSQL was down and durable
    sends were refused, and no metric showed it."""
    import json
    store_url = outage_cluster.create_database("health_outage")
    broker = start_broker(store=store_url)
    base = _http_base(broker)
    assert _get(base + "/health") == (200, json.dumps({"status": "ok"}))
    assert "hermod_store_up 1" in _get(base + "/metrics")[1].splitlines()

    outage_cluster.stop()
    producer = AsyncProducer(broker.url, "fault.health", [(0, durable("waiting"))]).start()
    wait_until(lambda: outage_reported(broker), "the broker's store-outage warning")
    status, body = _get(base + "/health")
    assert status == 503, body
    answer = json.loads(body)
    assert answer["status"] == "degraded" and "unreachable" in answer["reason"]
    assert "hermod_store_up 0" in _get(base + "/metrics")[1].splitlines()
    status = _hermod_status(broker)  # the CLI tells it too, and exits 1
    assert status.returncode == 1, status.stderr
    shown = json.loads(status.stdout)
    assert shown["status"] == "degraded" and shown["store"]["up"] is False and "unreachable" in shown["reason"]

    outage_cluster.start()
    producer.join(timeout=30)
    assert producer.accepted == [0]
    assert _get(base + "/health")[0] == 200
    assert "hermod_store_up 1" in _get(base + "/metrics")[1].splitlines()
    assert _hermod_status(broker).returncode == 0
