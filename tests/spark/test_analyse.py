"""The analytics job on a generated traffic set whose answers are known: rates per address and
bucket, size percentiles, acknowledgement latency, dead letters, the chart and the summary."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import insert

from hermod import store
from hermod.broker.spark.rows import encode_message
from hermod_testing import ROOT
from hermod.pipeline.analyse import AnalyseError, Request, analyse
from hermod.store.engine import make_engine
from hermod.store.models import acknowledgements, dead_letters, retained_messages

BASE = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
BASE_MS = int(BASE.timestamp() * 1000)

# (address, arrival offset in s, body size)
TRAFFIC = ([("t.orders", 1 + i * 5, size) for i, size in enumerate((10, 20, 30, 40, 50, 60))]
           + [("t.orders", 125 + i, 100) for i in range(3)]
           + [("t.events", 70 + i, 5) for i in range(4)])
# acknowledgement latencies (ms) of the first four t.orders messages
LATENCIES = (10, 20, 30, 1000)
DEAD = [("t.orders", "rejected"), ("t.orders", "rejected"), ("t.orders", "max-delivery-attempts"),
        ("t.events", "rejected")]


def generate(url: str) -> None:
    store.schema.upgrade(url)
    engine = make_engine(url)
    with engine.begin() as c:
        for message_id, (address, offset, size) in enumerate(TRAFFIC, start=1):
            c.execute(insert(retained_messages).values(
                message_id=message_id, address=address, routing_type="anycast", priority=4,
                arrival=BASE_MS + offset * 1000,
                encoded=encode_message("binary", b"x" * size, durable=True)))
        for message_id, latency in enumerate(LATENCIES, start=1):
            arrival = BASE_MS + TRAFFIC[message_id - 1][1] * 1000
            c.execute(insert(acknowledgements).values(message_id=message_id, queue="t.orders",
                                                      at=arrival + latency))
        for n, (address, reason) in enumerate(DEAD, start=1):
            c.execute(insert(dead_letters).values(message_id=100 + n, original_address=address,
                                                  queue=address, reason=reason, at=BASE_MS + 30_000))
    engine.dispose()


def rows(spark, path) -> list[dict]:
    return [r.asDict() for r in spark.read.parquet(str(path)).collect()]


def test_the_job_answers_rates_sizes_latency_and_dead_letters(spark, store_url, tmp_path):
    generate(store_url)
    out = tmp_path / "report"
    analyse(spark, Request(store_url, out, bucket=60))

    rates = sorted(rows(spark, out / "rates.parquet"), key=lambda r: (r["address"], r["bucket_start"]))
    naive = BASE.replace(tzinfo=None)  # Spark hands timestamps back as naive datetimes
    assert [(r["address"], r["bucket_start"], r["messages"], r["bytes"], round(r["rate_per_s"], 6))
            for r in rates] == [
        ("t.events", naive + timedelta(seconds=60), 4, 20, round(4 / 60, 6)),
        ("t.orders", naive, 6, 210, 0.1),
        ("t.orders", naive + timedelta(seconds=120), 3, 300, 0.05)]
    assert spark.read.parquet(str(out / "rates.parquet")).dtypes == [
        ("address", "string"), ("bucket_start", "timestamp"), ("messages", "bigint"),
        ("bytes", "bigint"), ("rate_per_s", "double")]

    sizes = {r["address"]: r for r in rows(spark, out / "sizes.parquet")}
    assert sizes["t.orders"] == {"address": "t.orders", "messages": 9, "min_bytes": 10,
                                 "p50_bytes": 50, "p90_bytes": 100, "p99_bytes": 100,
                                 "max_bytes": 100}
    assert sizes["t.events"] == {"address": "t.events", "messages": 4, "min_bytes": 5,
                                 "p50_bytes": 5, "p90_bytes": 5, "p99_bytes": 5, "max_bytes": 5}

    assert rows(spark, out / "latency.parquet") == [
        {"address": "t.orders", "acked": 4, "p50_ms": 20.0, "p90_ms": 1000.0, "p99_ms": 1000.0}]
    assert sorted((r["original_address"], r["reason"], r["messages"])
                  for r in rows(spark, out / "dead_letters.parquet")) == [
        ("t.events", "rejected", 1), ("t.orders", "max-delivery-attempts", 1),
        ("t.orders", "rejected", 2)]

    assert (out / "rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (out / "summary.txt").read_text().splitlines()
    tokens = {line.split()[0]: set(line.split()) for line in lines if line.startswith("address=")}
    assert {"address=t.orders", "messages=9", "bytes=510"} <= tokens["address=t.orders"]
    assert {"address=t.events", "messages=4", "bytes=20"} <= tokens["address=t.events"]
    assert any("13 retained messages" in line for line in lines)


def test_the_job_honours_the_time_window(spark, sqlite_store, tmp_path):
    generate(sqlite_store)
    out = tmp_path / "window"
    analyse(spark, Request(sqlite_store, out, from_time="2026-05-01T12:01:00Z",
                           to_time="2026-05-01T12:03:00", bucket=120))
    rates = sorted((r["address"], r["messages"]) for r in rows(spark, out / "rates.parquet"))
    assert rates == [("t.events", 4), ("t.orders", 3)]
    assert rows(spark, out / "latency.parquet") == []  # the acknowledged messages are earlier
    assert rows(spark, out / "dead_letters.parquet") == []


def test_bad_arguments_are_one_line_errors(spark, tmp_path):
    with pytest.raises(AnalyseError, match="--bucket"):
        analyse(spark, Request("sqlite:///x.db", tmp_path, bucket=0))
    with pytest.raises(AnalyseError, match="invalid time"):
        analyse(spark, Request("sqlite:///x.db", tmp_path, from_time="noon"))


def test_hermod_analyse_runs_on_local_spark_without_pyspark_python(sqlite_store, tmp_path):
    generate(sqlite_store)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["JAVA_TOOL_OPTIONS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # faster start
    out = tmp_path / "cli"
    result = subprocess.run([sys.executable, "-m", "hermod.broker", "analyse", "--store", sqlite_store,
                             "--out", str(out), "--master", "local[1]"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"analysis written to {out}"
    assert {p.name for p in out.iterdir()} >= {"rates.parquet", "sizes.parquet", "latency.parquet",
                                              "dead_letters.parquet", "rates.png", "summary.txt"}
    assert (out / "summary.txt").read_text().startswith("address=")


def test_an_empty_store_gives_empty_tables_and_says_so(spark, sqlite_store, tmp_path):
    store.schema.upgrade(sqlite_store)
    out = tmp_path / "empty"
    analyse(spark, Request(sqlite_store, out))
    assert rows(spark, out / "rates.parquet") == [] and rows(spark, out / "sizes.parquet") == []
    assert (out / "rates.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "summary.txt").read_text().splitlines()[1].startswith("0 retained messages")
