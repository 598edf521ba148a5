"""The paging spool on real files: first in first out across segments, every field kept,
segments deleted once read, and nothing left behind when a queue goes or the broker stops."""
from __future__ import annotations

import pytest

from test_routing import Envelope, Sink

from hermod.broker.core import links
from hermod.broker.core.message import ANYCAST, MULTICAST, Message
from hermod.broker.core.ports import MessageRecord, StoredReference
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.core.settings import SettingsRepository
from hermod.broker.spool import FileSpool


def ref(n: int, address: str = "orders", routing_type: str | None = ANYCAST, count: int = 0,
        size: int = 100) -> StoredReference:
    return StoredReference(MessageRecord(n, address, bytes([n % 256]) * size, routing_type,
                                         arrival=1_700_000_000_000 + n), count)


def files(spool: FileSpool) -> list[str]:
    return sorted(p.name for p in spool.directory.iterdir()) if spool.directory else []


def test_nothing_is_made_until_something_is_paged(tmp_path):
    spool = FileSpool(tmp_path)
    assert spool.read("orders", 10) == []
    assert list(tmp_path.iterdir()) == []
    spool.close()


def test_every_field_comes_back_in_order(tmp_path):
    spool = FileSpool(tmp_path)
    written = [ref(1), ref(2, "prices.eu", MULTICAST, count=3), ref(3, "ünïcode", None, size=0)]
    for r in written:
        spool.append("q", r)
    assert spool.read("q", 10) == written
    assert spool.read("q", 10) == []
    spool.close()


def test_reads_take_the_oldest_first_and_leave_the_rest(tmp_path):
    spool = FileSpool(tmp_path)
    for n in range(1, 11):
        spool.append("q", ref(n))
    assert [r.message.id for r in spool.read("q", 4)] == [1, 2, 3, 4]
    spool.append("q", ref(11))  # appends while reading go after the rest
    assert [r.message.id for r in spool.read("q", 100)] == [5, 6, 7, 8, 9, 10, 11]
    spool.close()


def test_queues_are_kept_apart(tmp_path):
    spool = FileSpool(tmp_path)
    spool.append("a", ref(1))
    spool.append("b::weird/name", ref(2))
    spool.append("a", ref(3))
    assert [r.message.id for r in spool.read("b::weird/name", 10)] == [2]
    assert [r.message.id for r in spool.read("a", 10)] == [1, 3]
    spool.close()


def test_segments_are_deleted_once_read(tmp_path):
    spool = FileSpool(tmp_path, segment_bytes=1000)  # ~8 records of 100 bytes a segment
    for n in range(1, 41):
        spool.append("q", ref(n))
    assert len(files(spool)) == 5
    assert [r.message.id for r in spool.read("q", 20)] == list(range(1, 21))
    assert len(files(spool)) == 3  # the two segments read to their end are gone
    assert [r.message.id for r in spool.read("q", 100)] == list(range(21, 41))
    assert files(spool) == []  # all read: nothing on disk
    spool.append("q", ref(41))  # and appending starts again
    assert [r.message.id for r in spool.read("q", 10)] == [41]
    spool.close()


def test_drop_and_close_leave_nothing_behind(tmp_path):
    spool = FileSpool(tmp_path)
    spool.append("a", ref(1))
    spool.append("b", ref(2))
    spool.drop("a")
    assert spool.read("a", 10) == []
    assert len(files(spool)) == 1
    spool.close()
    assert list(tmp_path.iterdir()) == []


# -- the page policy with the spool, in the core --------------------------------------------------
LIMIT = 1000


@pytest.fixture
def paging(tmp_path):
    """A post office with the in-memory journal (so every queue pages into the spool)."""
    spool = FileSpool(tmp_path)
    po = PostOffice(SettingsRepository([("p.#", {"max_size_bytes": LIMIT,
                                                 "address_full_policy": "page"})]), spool=spool)
    po.message_from_record = lambda r: Message(r.encoded, Envelope(), r.address, r.routing_type,
                                               None, r.arrival, r.id)
    po.create_queue("p.q", "p.q", ANYCAST)
    yield po, spool
    spool.close()


def post(po: PostOffice, n: int) -> None:
    for i in range(n):
        message = Message(b"%04d" % i + b"x" * 96, Envelope(), "p.q", ANYCAST)
        po.post(po.route(message, "p.q", ANYCAST))


def test_a_full_address_pages_into_the_spool_and_reads_back_in_order(paging):
    po, spool = paging
    post(po, 50)
    q = po.queues["p.q"]
    assert q.message_count == 50
    # The memory limit also counts each ref's overhead; the address limit counts bytes.
    assert q.paged >= 38 and q.size <= LIMIT and po.flow.memory_used <= LIMIT + q.held * po.flow.ref_overhead
    assert po.flow.verdict("p.q") == "page"  # not "block": the producer goes on
    sink = Sink()
    consumer = links.attach_consumer(po, links.ConsumerRequest("p.q", ANYCAST), sink)
    consumer.credit = 100
    po.run_dispatch()
    for ref in list(sink.got):
        q.acknowledge(ref)
    po.run_dispatch()
    assert [r.message.encoded[:4] for r in sink.got] == [b"%04d" % i for i in range(50)]
    assert q.message_count == 0 and q.paged == 0 and files(spool) == []


def test_deleting_a_paging_queue_deletes_what_it_spooled(paging):
    po, spool = paging
    post(po, 50)
    assert files(spool) != []
    po.delete_queue("p.q")
    assert files(spool) == []
