"""The pipeline against the contract's "Data pipeline (Spark)" text (issue 14 item 9): the `body`
of an AMQP value holding binary is those bytes, `bytes` in the analytics is the length of that
`body`, the read option `table` gives the store's acknowledgement and dead-letter records (the
message's `id`, its `address`, the time, the reason), and a DataFrame read from the store is
written back with every property's recorded AMQP type."""
from __future__ import annotations

import uuid

import pytest

pytest.importorskip("pyspark")

from proton import Message, byte, char, float32, int32, short, symbol, timestamp, ubyte, ulong  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from hermod import store  # noqa: E402
from hermod.broker.protocol import codec  # noqa: E402
from hermod.pipeline.analyse import Request, analyse  # noqa: E402
from hermod.store.engine import make_engine  # noqa: E402
from hermod.store.models import acknowledgements, dead_letters, retained_messages  # noqa: E402
from hermod_testing import wait_for  # noqa: E402
from spark_helpers import RETENTION, table_rows  # noqa: E402
from wire_helpers import connect  # noqa: E402


def load(spark, url: str, **options):
    reader = spark.read.format("hermod").option("store", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_an_amqp_value_holding_binary_reads_as_those_bytes(spark, sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    conn = connect(b.url)
    sender = conn.create_sender("pipe.bodies")
    long_binary = bytes(range(256)) * 2  # over 255 bytes: encoded as vbin32
    for n, body in enumerate((b"\x00\x01raw", long_binary, "text", b"")):
        sender.send(Message(body=body, id=f"m-{n}"))  # bytes: an amqp-value binary
    sender.send(Message(body=b"data", id="m-4", inferred=True))  # a data section
    conn.close()

    rows = load(spark, sqlite_store).orderBy("id").collect()
    assert [(r.message_id, r.body, r.body_text) for r in rows] == [
        ("m-0", b"\x00\x01raw", None), ("m-1", long_binary, None), ("m-2", b"text", "text"),
        ("m-3", b"", None), ("m-4", b"data", None)]


def test_analytics_bytes_are_the_lengths_of_body(spark, sqlite_store, tmp_path):
    store.schema.upgrade(sqlite_store)
    bodies = [codec.encode_section(codec.AMQP_VALUE, b"v" * 10),
              codec.encode_section(codec.AMQP_VALUE, b"w" * 300),
              codec.encode_section(codec.AMQP_VALUE, "abc"),
              codec.encode_section(codec.DATA, b"d" * 5)]
    engine = make_engine(sqlite_store)
    with engine.begin() as c:
        for n, body in enumerate(bodies, start=1):
            c.execute(insert(retained_messages).values(
                message_id=n, address="t.sizes", routing_type="anycast", priority=4,
                arrival=1_777_636_800_000 + n, encoded=body))
    engine.dispose()
    out = tmp_path / "report"
    result = analyse(spark, Request(sqlite_store, out, bucket=60))

    assert [(r["address"], r["messages"], r["bytes"]) for r in result["rates"]] == [("t.sizes", 4, 318)]
    sizes = result["sizes"][0]
    assert (sizes["min_bytes"], sizes["max_bytes"], sizes["bytes"]) == (3, 300, 318)
    summary = (out / "summary.txt").read_text().splitlines()[0].split()
    assert {"address=t.sizes", "messages=4", "bytes=318"} <= set(summary)


DEAD_LETTERING = RETENTION + """
[[address_settings]]
match = "pipe.records"
dead_letter_address = "pipe.dlq"
"""


def test_table_option_reads_acknowledgement_and_dead_letter_records(spark, sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=DEAD_LETTERING)
    conn = connect(b.url)
    sender = conn.create_sender("pipe.records")
    for n in range(3):
        sender.send(Message(body=f"m-{n}", id=f"m-{n}"))
    receiver = conn.create_receiver("pipe.records")
    assert receiver.receive(timeout=10).id == "m-0"
    receiver.accept()
    assert receiver.receive(timeout=10).id == "m-1"
    receiver.reject()
    conn.close()
    wait_for(lambda: table_rows(sqlite_store, acknowledgements) and table_rows(sqlite_store, dead_letters),
             message="the acknowledgement and the dead letter recorded")

    ids = {r.message_id: r.id for r in load(spark, sqlite_store, address="pipe.records").collect()}
    acked = load(spark, sqlite_store, table="acknowledgements").collect()
    assert [(r.id, r.address, r.queue) for r in acked] == [(ids["m-0"], "pipe.records", "pipe.records")]
    assert acked[0].acknowledged_time is not None and acked[0].latency_ms >= 0
    dead = load(spark, sqlite_store, table="dead_letters").collect()
    assert [(r.id, r.address, r.reason) for r in dead] == [(ids["m-1"], "pipe.records", "rejected")]
    assert dead[0].time is not None

    for table in ("acknowledgements", "dead_letters"):
        assert load(spark, sqlite_store, table=table, address="pipe.records").count() == 1
        assert load(spark, sqlite_store, table=table, address="pipe.other").count() == 0
        assert load(spark, sqlite_store, table=table, address="pipe.#").count() == 1


def test_writing_back_keeps_every_recorded_property_type(spark, sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    conn = connect(b.url)
    sender = conn.create_sender("pipe.typed")
    properties = {
        "s": "text", "sym": symbol("sy"), "yes": True, "b": byte(-3), "sh": short(-300),
        "i": int32(42), "l": 2 ** 40, "ub": ubyte(200), "ul": ulong(2 ** 64 - 1),
        "f": float32(0.1), "d": 2.5, "t": timestamp(1_700_000_000_123), "u": uuid.UUID(int=5),
        "bin": b"\x01\xff", "c": char("x"), "nothing": None,
    }
    sender.send(Message(body="hello", id="m-1", properties=properties))
    conn.close()

    load(spark, sqlite_store, address="pipe.typed").write.format("hermod").mode("append") \
        .option("url", b.url).option("address", "pipe.copy").save()
    original, = load(spark, sqlite_store, address="pipe.typed").collect()
    copy, = load(spark, sqlite_store, address="pipe.copy").collect()
    assert copy.property_types == original.property_types
    assert copy.properties == original.properties
    assert copy.property_types["nothing"] == "null" and copy.properties["nothing"] is None
