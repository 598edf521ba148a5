"""Read throughput of the retention table through the `hermod` Spark data source, on SQLite and
on PostgreSQL (a private cluster from tests/store/pgcluster.py).

    .venv/bin/python benchmarks/spark_read_bench.py [--rows 200000] [--partitions 2] [--master local[2]]

Fills a fresh store with ROWS retained messages (a 200-byte data body, five application
properties of mixed types, message id, subject, creation time), then times a full read:
`spark.read.format("hermod").load()` written to Spark's `noop` sink, so every row is fetched,
decoded into the contract's columns and handed to Spark. Reports rows/s per back-end (best of
`--reps`), plus the same read without Spark (`store_reader.read` in this process) as the
single-core floor. Not part of `make test`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "store"))


def fill(url: str, rows: int) -> None:
    from sqlalchemy import insert

    from hermod import store
    from hermod.broker.spark.rows import encode_message
    from hermod.store.engine import make_engine
    from hermod.store.models import retained_messages

    store.schema.upgrade(url)
    engine = make_engine(url, sqlite_synchronous="NORMAL")
    start = int(time.time() * 1000) - rows
    batch = []
    with engine.begin() as connection:
        for i in range(rows):
            encoded = encode_message(
                "binary", bytes(200), durable=True, message_id=f"msg-{i}", subject="bench",
                application_properties=[("region", "string", "EU" if i % 2 else "US"),
                                        ("n", "int", i), ("price", "double", i / 7),
                                        ("flag", "boolean", i % 3 == 0), ("at", "timestamp", start + i)])
            batch.append({"message_id": i + 1, "address": f"bench.{i % 4}", "routing_type": "anycast",
                          "priority": 4, "arrival": start + i, "encoded": encoded})
            if len(batch) == 10_000:
                connection.execute(insert(retained_messages), batch)
                batch = []
        if batch:
            connection.execute(insert(retained_messages), batch)
    engine.dispose()


def time_spark(spark, url: str, partitions: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        (spark.read.format("hermod").option("store", url).option("numPartitions", partitions)
         .load().write.format("noop").mode("overwrite").save())
        best = min(best, time.perf_counter() - started)
    return best


def time_plain(url: str) -> float:
    from hermod.broker.spark.store_reader import IdRange, Selection, read

    started = time.perf_counter()
    for _ in read(Selection(url), IdRange(0, 2 ** 62)):
        pass
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("hermod-read-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            cluster = None
            if backend == "sqlite":
                url = f"sqlite:///{tmp}/bench.db"
            else:
                from pgcluster import PgCluster

                cluster = PgCluster(durable=False).__enter__()
                url = cluster.create_database("hermod_bench")
            try:
                fill(url, args.rows)
                time_spark(spark, url, args.partitions, 1)  # warm-up: workers, JIT
                seconds = time_spark(spark, url, args.partitions, args.reps)
                plain = time_plain(url)
                results.append((backend, args.rows / seconds, args.rows / plain))
            finally:
                if cluster is not None:
                    cluster.__exit__(None, None, None)
    spark.stop()
    print(f"rows={args.rows} partitions={args.partitions} master={args.master}")
    print(f"{'backend':<12}{'spark rows/s':>14}{'plain rows/s':>14}")
    for backend, spark_rate, plain_rate in results:
        print(f"{backend:<12}{spark_rate:>14,.0f}{plain_rate:>14,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
