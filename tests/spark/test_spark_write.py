"""Writing with `df.write.format("hermod")` and `df.writeStream.format("hermod")`: every row an
AMQP message, typed properties, accepted before the task ends; and the round trip
DataFrame -> Hermod -> DataFrame with property types preserved."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import Row, functions as F  # noqa: E402
from pyspark.sql.types import (BinaryType, BooleanType, ByteType, DoubleType,  # noqa: E402
                               FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampType)

from proton import Timeout  # noqa: E402
from hermod_testing import wait_for
from spark_helpers import RETENTION
from wire_helpers import connect, topic

SCHEMA = StructType([
    StructField("body", StringType()), StructField("n", IntegerType()),
    StructField("small", ShortType()), StructField("tiny", ByteType()),
    StructField("big", LongType()), StructField("ratio", DoubleType()),
    StructField("f", FloatType()), StructField("flag", BooleanType()),
    StructField("at", TimestampType()), StructField("raw", BinaryType()),
    StructField("label", StringType()), StructField("subject", StringType()),
    StructField("group_id", StringType()), StructField("message_id", StringType()),
    StructField("priority", IntegerType()), StructField("ignored", StringType()),
    StructField("properties", MapType(StringType(), IntegerType())),
])
AT = datetime(2026, 5, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)


def typed_rows(count: int) -> list[tuple]:
    return [(f"row {i}", i, 300 + i, -i, 2 ** 40 + i, i + 0.5, 0.25, i % 2 == 0, AT, bytes([i, 255]),
             None if i == 1 else f"label-{i}", "subj", f"g{i % 2}", f"mid-{i}", 5, "not sent",
             {"extra": i * 10}) for i in range(count)]


def test_round_trip_dataframe_to_hermod_to_dataframe_keeps_property_types(spark, store_url, start_broker):
    b = start_broker(store=store_url, config=RETENTION)
    df = spark.createDataFrame(typed_rows(4), SCHEMA).repartition(2)
    df.write.format("hermod").mode("append").option("url", b.url).option("address", "pipe.rt") \
        .option("propertyColumns", "n,small,tiny,big,ratio,f,flag,at,raw,label").save()

    back = spark.read.format("hermod").option("store", store_url).option("address", "pipe.rt") \
        .load().orderBy("message_id").collect()
    assert [r.body_text for r in back] == [f"row {i}" for i in range(4)]
    first = back[0]
    assert first.property_types == {
        "n": "int", "small": "short", "tiny": "byte", "big": "long", "ratio": "double",
        "f": "float", "flag": "boolean", "at": "timestamp", "raw": "binary", "label": "string",
        "extra": "int"}
    assert first.properties == {
        "n": "0", "small": "300", "tiny": "0", "big": "1099511627776", "ratio": "0.5", "f": "0.25",
        "flag": "true", "at": "2026-05-01T12:00:00.250Z", "raw": "00ff", "label": "label-0",
        "extra": "0"}
    assert "label" not in back[1].properties  # a NULL property is left out
    assert (first.subject, first.group_id, first.message_id, first.priority, first.durable) == \
        ("subj", "g0", "mid-0", 5, True)
    assert "ignored" not in first.properties

    # Hermod -> DataFrame -> Hermod: a DataFrame read from the store is written back with the
    # property types it came with.
    spark.read.format("hermod").option("store", store_url).option("address", "pipe.rt").load() \
        .write.format("hermod").mode("append").option("url", b.url).option("address", "pipe.copy").save()
    copies = spark.read.format("hermod").option("store", store_url).option("address", "pipe.copy") \
        .load().orderBy("message_id").collect()
    assert [(c.properties, c.property_types, c.body, c.message_id) for c in copies] == \
        [(o.properties, o.property_types, o.body, o.message_id) for o in back]

    # What a consumer sees: AMQP types of the properties, a string body.
    conn = connect(b.url)
    receiver = conn.create_receiver("pipe.rt")
    got = []
    for _ in range(4):
        got.append(receiver.receive(timeout=10))
        receiver.accept()
    conn.close()
    message = next(m for m in got if m.id == "mid-0")
    assert message.body == "row 0" and message.durable and message.priority == 5
    raw = message.properties.pop("raw")
    assert bytes(raw) == b"\x00\xff"  # binary (proton hands out a memoryview)
    assert {k: type(v).__name__ for k, v in message.properties.items()} == {
        "n": "int32", "small": "short", "tiny": "byte", "big": "int", "ratio": "float",
        "f": "float32", "flag": "bool", "at": "timestamp", "label": "str", "extra": "int32"}


def test_options_body_binary_routing_type_and_durable(spark, start_broker):
    b = start_broker()
    conn = connect(b.url)
    subscriber = conn.create_receiver("w.news", name="sub", options=[topic()])
    df = spark.createDataFrame([Row(payload=bytearray(b"\x00\x01"), durable=None),
                                Row(payload=bytearray(b"\x02"), durable=True)])
    df.write.format("hermod").mode("append").option("url", b.url).option("address", "w.news") \
        .option("routingType", "multicast").option("body", "payload").option("durable", "false").save()
    messages = []
    for _ in range(2):
        messages.append(subscriber.receive(timeout=10))
        subscriber.accept()
    messages.sort(key=lambda m: bytes(m.body))
    assert [bytes(m.body) for m in messages] == [b"\x00\x01", b"\x02"]
    assert [m.durable for m in messages] == [False, True]  # the row's durable wins over the option
    conn.close()


def test_a_refused_send_fails_the_job_and_bad_options_fail_before_any_task(spark, start_broker):
    b = start_broker(config="""
[[address_settings]]
match = "closed.#"
auto_create_addresses = false
""")
    df = spark.createDataFrame([Row(body="x")])
    with pytest.raises(Exception, match="closed.nowhere"):
        df.write.format("hermod").mode("append").option("url", b.url) \
            .option("address", "closed.nowhere").save()
    with pytest.raises(Exception, match="only appends"):
        df.write.format("hermod").mode("overwrite").option("url", b.url).option("address", "a").save()
    with pytest.raises(Exception, match="need options url and address"):
        df.write.format("hermod").mode("append").option("url", b.url).save()
    with pytest.raises(Exception, match="propertyColumns: no column 'nope'"):
        df.write.format("hermod").mode("append").option("url", b.url).option("address", "a") \
            .option("propertyColumns", "nope").save()


def test_streaming_write_of_a_rate_source(spark, start_broker, tmp_path):
    b = start_broker()
    conn = connect(b.url)
    receiver = conn.create_receiver("w.ticks", credit=500)
    stream = (spark.readStream.format("rate").option("rowsPerSecond", 50).option("numPartitions", 2)
              .load()
              .select(F.concat(F.lit("tick "), F.col("value").cast("string")).alias("body"),
                      F.col("value").alias("seq")))
    query = (stream.writeStream.format("hermod").option("url", b.url).option("address", "w.ticks")
             .option("propertyColumns", "seq")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    seen: set[int] = set()
    try:
        def enough() -> bool:
            while True:
                try:
                    message = receiver.receive(timeout=0.2)
                except Timeout:  # nothing more right now
                    break
                receiver.accept()
                assert message.body == f"tick {message.properties['seq']}"
                seen.add(message.properties["seq"])
            return set(range(60)) <= seen
        wait_for(enough, timeout=90, interval=0.1, message="60 ticks through the broker")
    finally:
        query.stop()
    assert query.exception() is None
    assert query.lastProgress is not None and query.lastProgress["numInputRows"] >= 0
    conn.close()
