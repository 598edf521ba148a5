"""A unit the database refuses is that unit's fault, not an outage: its producer gets a
rejection with a condition at once, and every other durable send goes on (issue 12, defect 11).
Real brokers on real PostgreSQL; the refusal is real too: a 3 KB `_AMQ_DUPL_ID` is over
PostgreSQL's btree index row limit (SQLSTATE 54000), so the unit remembering it cannot commit."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.utils import SendException

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "durable", TESTS / "wire"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from durable_clients import AsyncProducer, body_of, drain_queue  # noqa: E402
from wire_helpers import connect  # noqa: E402

from hermod import store  # noqa: E402
from hermod.broker.core.ports import DeleteQueue, SetDeliveryCount  # noqa: E402
from store_testing import queue, send, setup_ops, submit_and_wait  # noqa: E402

GIVE_UP_S = "30"  # an outage would hold every durable send this long
PROMPT_S = 5.0

DURABLE_QUEUE = """
[[address]]
name = "orders"
routing = ["anycast"]
  [[address.queue]]
  name = "orders"
  routing = "anycast"
"""


def oversized_duplicate_id() -> str:
    return os.urandom(1600).hex()  # 3,200 incompressible characters


def durable(body: str, **properties) -> Message:
    return Message(body=body, durable=True, properties=properties or None)


@pytest.fixture
def pg_broker(start_broker, pg_url):
    return start_broker(config=DURABLE_QUEUE, store=pg_url, env={"HERMOD_STORE_GIVE_UP_S": GIVE_UP_S})


def test_a_unit_postgresql_refuses_is_rejected_and_the_next_send_is_accepted_promptly(pg_broker):
    connection = connect(pg_broker.url)
    try:
        sender = connection.create_sender("orders")
        started = time.monotonic()
        with pytest.raises(SendException) as refused:
            sender.send(durable("too long an id", _AMQ_DUPL_ID=oversized_duplicate_id()))
        assert refused.value.state == Delivery.REJECTED
        assert time.monotonic() - started < PROMPT_S

        started = time.monotonic()
        sender.send(durable("fine", _AMQ_DUPL_ID="a-normal-id"))
        sender.send(durable("fine too"))
        assert time.monotonic() - started < PROMPT_S
    finally:
        connection.close()

    assert [body_of(m) for m in drain_queue(pg_broker.url, "orders")] == ["fine", "fine too"]


def test_a_refused_unit_fails_alone_in_a_batch_with_its_neighbours(pg_broker):
    messages = [(n, durable(f"m{n}")) for n in range(20)]
    messages[7] = (7, durable("m7", _AMQ_DUPL_ID=oversized_duplicate_id()))
    producer = AsyncProducer(pg_broker.url, "orders", messages, window=20)
    started = time.monotonic()
    producer.start()
    producer.join()

    assert time.monotonic() - started < PROMPT_S
    assert [key for key, _, _ in producer.refused] == [7]
    (_, outcome, description), = producer.refused
    assert outcome == "rejected" and "message not stored" in description
    assert sorted(producer.accepted) == [n for n in range(20) if n != 7]
    assert [body_of(m) for m in drain_queue(pg_broker.url, "orders")] == [
        f"m{n}" for n in range(20) if n != 7]


# -- SQLite "disk full": a real full file system (a small tmpfs) ----------------------------------


@pytest.fixture
def small_filesystem(tmp_path):
    """A 4 MiB tmpfs (needs root, as the test sandbox and CI run); unmounted at the end."""
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mountpoint)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs (needs root)")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it (delete it to make room)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    with open(directory / "filler-tail", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    return filler


def test_sqlite_disk_full_loses_no_unit_without_a_completion(small_filesystem):
    url = f"sqlite:///{small_filesystem / 'hermod.db'}"
    journal = store.open_journal(url, None, fail_after_s=0.5)
    try:
        submit_and_wait(journal, setup_ops(queue("orders"), queue("scratch")))
        assert submit_and_wait(journal, send(1, "orders", body=os.urandom(2000))) is None
        filler = fill(small_filesystem)

        # Units no producer waits for: failing them would lose them silently.
        journal.submit([SetDeliveryCount("orders", 1, 3)], None)
        journal.submit([DeleteQueue("scratch")], None)
        # A producer's unit: rejected clearly after fail_after_s, never accepted.
        outcome = submit_and_wait(journal, send(2, "orders", body=os.urandom(200_000)))
        assert isinstance(outcome, store.StoreUnavailable), outcome
        assert journal.stats().expired_units == 1

        filler.unlink()
        (small_filesystem / "filler-tail").unlink()
        assert submit_and_wait(journal, send(3, "orders")) is None  # after the waiting ones
        recovered = journal.recover()
    finally:
        journal.close()
    assert [(r.message.id, r.delivery_count) for r in recovered.references["orders"]] == [(1, 3), (3, 0)]
    assert [q.name for q in recovered.queues] == ["orders"]


# -- the paging spool on a full file system --------------------------------------------------------

PAGING = """
[[address_settings]]
match = "spooled"
max_size_bytes = 20000
address_full_policy = "page"
"""


def test_a_full_paging_disk_rejects_the_send_and_paging_resumes_once_drained(start_broker,
                                                                         small_filesystem):
    broker = start_broker(config=PAGING, env={"TMPDIR": str(small_filesystem)})
    body = os.urandom(8000)
    connection = connect(broker.url)
    try:
        sender = connection.create_sender("spooled")
        accepted = 0
        with pytest.raises(SendException) as refused:
            for _ in range(2000):  # 16 MB: far more than the 4 MiB file system holds
                sender.send(Message(body=body))
                accepted += 1
        assert refused.value.state == Delivery.REJECTED
        assert accepted > 100  # most went to the spool before it filled up
        receiver = connection.create_receiver("spooled", credit=50)
        for n in range(accepted):  # every accepted message, in order, nothing lost
            message = receiver.receive(timeout=15)
            assert body_of(message) == body, n
            receiver.accept()
        # Paging goes on: the drained spool has room again.
        more = 20
        for _ in range(more):
            sender.send(Message(body=body))
        for _ in range(more):
            assert body_of(receiver.receive(timeout=15)) == body
            receiver.accept()
    finally:
        connection.close()
    assert broker.proc.poll() is None
    assert any("paging a message failed" in line for line in broker.stderr_lines)
