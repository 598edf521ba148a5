"""Reading retained messages with `spark.read.format("hermod")`: partitioned by id ranges, every
row exactly once, the contract's typed columns, on SQLite and PostgreSQL stores, while the
broker runs; and browsing a live queue over AMQP."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from proton import Message, byte, char, float32, int32, short, symbol, timestamp, ubyte, ulong

from spark_helpers import RETENTION, send_bodies, table_rows
from hermod.store.models import retained_messages
from wire_helpers import connect, receive_bodies

COLUMNS = ["id", "address", "routing_type", "message_id", "durable", "priority", "creation_time",
           "arrival_time", "subject", "group_id", "properties", "property_types", "annotations",
           "body", "body_text"]


def store_ids(url: str, address: str | None = None) -> list[int]:
    where = retained_messages.c.address == address if address else None
    return [row.id for row in table_rows(url, retained_messages, where)]


def test_the_format_is_found_without_registering_it(spark, sqlite_store, start_broker):
    start_broker(store=sqlite_store, config=RETENTION)  # creates the schema
    df = spark.read.format("hermod").option("store", sqlite_store).load()
    assert df.columns == COLUMNS
    assert df.count() == 0
    assert dict(df.dtypes) == {
        "id": "bigint", "address": "string", "routing_type": "string", "message_id": "string",
        "durable": "boolean", "priority": "int", "creation_time": "timestamp",
        "arrival_time": "timestamp", "subject": "string", "group_id": "string",
        "properties": "map<string,string>", "property_types": "map<string,string>",
        "annotations": "map<string,string>", "body": "binary", "body_text": "string"}


def test_register_twice_is_harmless(spark, sqlite_store, start_broker):
    import hermod.broker.spark

    start_broker(store=sqlite_store, config=RETENTION)
    hermod.broker.spark.register(spark)
    hermod.broker.spark.register(spark)
    assert spark.read.format("hermod").option("store", sqlite_store).load().count() == 0


def test_partitioned_reads_return_every_retained_row_exactly_once(spark, store_url, start_broker):
    b = start_broker(store=store_url, config=RETENTION)
    send_bodies(b.url, "pipe.a", [f"a{i}" for i in range(130)])
    send_bodies(b.url, "pipe.b", [f"b{i}" for i in range(40)])
    send_bodies(b.url, "other", ["not retained"])
    expected = store_ids(store_url)
    assert len(expected) == 170

    # Read while the broker runs.
    for partitions in (1, 7):
        df = spark.read.format("hermod").option("store", store_url) \
            .option("numPartitions", partitions).load()
        assert df.rdd.getNumPartitions() == partitions
        ids = [row.id for row in df.select("id").collect()]
        assert sorted(ids) == expected  # each row once: no duplicate, none missing
    per_partition = spark.read.format("hermod").option("store", store_url) \
        .option("numPartitions", 4).load().rdd.glom().map(len).collect()
    assert per_partition == [42, 43, 42, 43]  # id ranges split by row count

    only_a = spark.read.format("hermod").option("store", store_url).option("address", "pipe.a") \
        .option("numPartitions", 3).load()
    assert only_a.rdd.getNumPartitions() == 3
    assert sorted(r.id for r in only_a.select("id").collect()) == store_ids(store_url, "pipe.a")
    assert {r.body_text for r in only_a.select("body_text").collect()} == {f"a{i}" for i in range(130)}

    wildcard = spark.read.format("hermod").option("store", store_url).option("address", "pipe.*").load()
    assert wildcard.count() == 170
    assert spark.read.format("hermod").option("store", store_url) \
        .option("address", "nothing.#").load().count() == 0


def test_more_partitions_than_rows_gives_one_per_row(spark, sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    send_bodies(b.url, "pipe.few", ["x", "y", "z"])
    df = spark.read.format("hermod").option("store", sqlite_store).option("numPartitions", 10).load()
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.body_text for r in df.collect()) == ["x", "y", "z"]


def test_arrival_time_window(spark, sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    send_bodies(b.url, "pipe.w", ["early"])
    rows = spark.read.format("hermod").option("store", sqlite_store).load().collect()
    arrival = rows[0].arrival_time.replace(tzinfo=timezone.utc)
    first = arrival.isoformat()
    window = spark.read.format("hermod").option("store", sqlite_store)
    assert window.option("from", first).load().count() == 1
    assert window.option("from", "2000-01-01T00:00:00Z").option("to", first).load().count() == 0
    assert window.option("from", "2000-01-01").option("to", "2999-01-01T00:00:00").load().count() == 1


def test_columns_decode_headers_properties_types_annotations_and_bodies(spark, store_url, start_broker):
    b = start_broker(store=store_url, config=RETENTION)
    conn = connect(b.url)
    sender = conn.create_sender("pipe.typed")
    properties = {
        "s": "text", "sym": symbol("sy"), "yes": True, "no": False, "b": byte(-3), "sh": short(-300),
        "i": int32(42), "l": 2 ** 40, "ub": ubyte(200), "ul": ulong(2 ** 63), "f": float32(0.1),
        "d": 2.5, "t": timestamp(1_700_000_000_123), "u": uuid.UUID(int=5), "bin": b"\x01\xff",
        "c": char("x"), "nothing": None,
    }
    sender.send(Message(body="hello", id="m-1", subject="subj", group_id="g1", durable=True,
                        priority=7, creation_time=1_700_000_000.5, properties=properties,
                        annotations={symbol("x-opt-k"): 3, symbol("x-opt-at"): timestamp(0)}))
    sender.send(Message(body=b"\x00\x01raw", id=ulong(9), inferred=True))  # one data section
    sender.send(Message(body=b"plain text", content_type="text/plain", inferred=True))
    sender.send(Message(body=[1, 2]))  # an amqp-value list: its AMQP encoding
    sender.send(Message(body=b"\x07"))  # an amqp-value binary: those bytes
    conn.close()

    rows = spark.read.format("hermod").option("store", store_url).load().orderBy("id").collect()
    typed, raw, text, listed, value_binary = rows
    assert (typed.address, typed.routing_type, typed.message_id, typed.durable, typed.priority) == \
        ("pipe.typed", "anycast", "m-1", True, 7)
    assert typed.creation_time == datetime(2023, 11, 14, 22, 13, 20, 500000)
    assert (typed.subject, typed.group_id, typed.body, typed.body_text) == ("subj", "g1", b"hello", "hello")
    assert typed.arrival_time is not None
    assert typed.properties == {
        "s": "text", "sym": "sy", "yes": "true", "no": "false", "b": "-3", "sh": "-300", "i": "42",
        "l": "1099511627776", "ub": "200", "ul": "9223372036854775808", "f": "0.1", "d": "2.5",
        "t": "2023-11-14T22:13:20.123Z", "u": "00000000-0000-0000-0000-000000000005",
        "bin": "01ff", "c": "x", "nothing": None}
    assert typed.property_types == {
        "s": "string", "sym": "symbol", "yes": "boolean", "no": "boolean", "b": "byte",
        "sh": "short", "i": "int", "l": "long", "ub": "ubyte", "ul": "ulong", "f": "float",
        "d": "double", "t": "timestamp", "u": "uuid", "bin": "binary", "c": "char",
        "nothing": "null"}
    assert typed.annotations == {"x-opt-k": "3", "x-opt-at": "1970-01-01T00:00:00.000Z"}

    assert (raw.message_id, raw.durable, raw.priority, raw.creation_time) == ("9", False, 4, None)
    assert (raw.body, raw.body_text, raw.properties) == (b"\x00\x01raw", None, {})
    assert (text.body, text.body_text) == (b"plain text", "plain text")
    assert listed.body_text is None and listed.body[0] in (0xC0, 0xD0, 0x45)  # list encoding
    assert (value_binary.body, value_binary.body_text) == (b"\x07", None)


def test_browse_reads_a_live_queue_in_order_and_leaves_the_messages(spark, start_broker):
    b = start_broker()  # memory store: browsing needs no retention
    send_bodies(b.url, "live.q", [f"m{i}" for i in range(5)])
    df = spark.read.format("hermod").option("url", b.url).option("queue", "live.q").load()
    rows = df.collect()
    assert [(r.id, r.address, r.body_text) for r in rows] == [(i, "live.q", f"m{i}") for i in range(5)]
    assert all(r.routing_type is None and r.arrival_time is None for r in rows)
    # Fully qualified queue name, and again: nothing was taken.
    again = spark.read.format("hermod").option("url", b.url).option("queue", "live.q::live.q").load()
    assert [r.body_text for r in again.collect()] == [f"m{i}" for i in range(5)]
    conn = connect(b.url)
    assert receive_bodies(conn.create_receiver("live.q"), 5) == [f"m{i}" for i in range(5)]
    conn.close()


def test_reading_without_store_or_url_is_an_error(spark):
    with pytest.raises(Exception, match="needs option store"):
        spark.read.format("hermod").load().collect()


def test_retained_messages_reach_spark_as_arrow_batches_equal_to_the_row_form(spark, sqlite_store, start_broker):
    import pyarrow as pa

    from hermod.broker.spark.source import StoreReader
    from hermod.broker.spark.store_reader import read

    b = start_broker(store=sqlite_store, config=RETENTION)
    send_bodies(b.url, "pipe.arrow", ["one", "two"], properties={"k": 1}, creation_time=1.5)
    schema = spark.read.format("hermod").option("store", sqlite_store).load().schema
    reader = StoreReader({"store": sqlite_store}, schema)
    assert reader.arrow
    (partition,) = reader.partitions()
    (batch,) = list(reader.read(partition))
    assert isinstance(batch, pa.RecordBatch)
    as_rows = [tuple(dict(v) if isinstance(v, list) else v for v in row.values())
               for row in batch.to_pylist()]  # Arrow maps come back as lists of pairs
    plain = list(read(reader.selection, partition.id_range))
    assert [r[:6] + r[8:] for r in as_rows] == [p[:6] + p[8:] for p in plain]
    assert [(r[6].timestamp(), r[7].timestamp()) for r in as_rows] == \
        [(p[6].timestamp(), p[7].timestamp()) for p in plain]
