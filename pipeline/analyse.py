"""The analytics job: what passed through Hermod, from the retention tables of its store.

    hermod analyse --store URL --out DIR [--from T1] [--to T2] [--bucket SECONDS] [--master M]
    spark-submit pipeline/analyse.py --store URL --out DIR ...

Writes into DIR: rates.parquet (messages and bytes per address and time bucket), sizes.parquet
(body size distribution per address), latency.parquet (arrival to acknowledgement, per address,
where consumers acknowledged), dead_letters.parquet (by original address and reason), rates.png
(messages/s per address over time) and summary.txt (a line per address, then free text).

Everything is read through the `hermod` data source, in id-range partitions, so the job runs
unchanged on a laptop (`local[*]`) or on a cluster whose executors can reach the store.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BUCKET_S = 60
DEFAULT_MASTER = "local[*]"


class AnalyseError(Exception):
    """A one-line problem with the job's arguments or its store."""


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--store", required=True, help="store URL (SQLite or PostgreSQL)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--from", dest="from_time", metavar="T1", help="arrival time from (ISO 8601)")
    parser.add_argument("--to", dest="to_time", metavar="T2", help="arrival time before (ISO 8601)")
    parser.add_argument("--bucket", type=int, default=DEFAULT_BUCKET_S, metavar="SECONDS",
                        help="rate bucket width (default 60)")
    parser.add_argument("--master", default=None,
                        help="Spark master (default local[*]; under spark-submit, its own)")
    return parser


@dataclass(frozen=True)
class Request:
    store: str
    out: Path
    from_time: str | None = None
    to_time: str | None = None
    bucket: int = DEFAULT_BUCKET_S


def run(args: argparse.Namespace) -> Path:
    """Start (or join) a Spark session, run the job, write the files; returns the directory."""
    request = Request(args.store, Path(args.out), args.from_time, args.to_time, args.bucket)
    _check(request)
    # The workers run this very interpreter (hermod is installed here), unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("hermod-analyse") \
        .config("spark.sql.session.timeZone", "UTC")
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit chose the master
    master = args.master or (None if under_submit else DEFAULT_MASTER)
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "8")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")  # the job's own output is the files and one line
    try:
        analyse(spark, request)
    finally:
        spark.stop()
    return request.out


def _check(request: Request) -> None:
    from hermod.broker.times import TimeError, parse_time

    if request.bucket <= 0:
        raise AnalyseError(f"--bucket must be a positive number of seconds, not {request.bucket}")
    try:
        for value in (request.from_time, request.to_time):
            if value:
                parse_time(value)
    except TimeError as error:
        raise AnalyseError(str(error)) from None
    from hermod.store.engine import is_memory

    if is_memory(request.store):
        raise AnalyseError("analyse needs a database store (sqlite:/// or postgresql:// URL)")


def _read(spark, request: Request, table: str):
    reader = spark.read.format("hermod").option("store", request.store).option("table", table)
    if table != "acknowledgements":  # acknowledgements are selected by their message's arrival
        if request.from_time:
            reader = reader.option("from", request.from_time)
        if request.to_time:
            reader = reader.option("to", request.to_time)
    return reader.load()


def analyse(spark, request: Request) -> dict:
    """Compute the four tables, write every output file; returns the collected summary rows."""
    from pyspark.sql import functions as F

    import hermod.broker.spark

    _check(request)
    hermod.broker.spark.register(spark)
    out = request.out
    out.mkdir(parents=True, exist_ok=True)
    bucket = int(request.bucket)

    messages = _read(spark, request, "messages").select(
        "address", "arrival_time",
        F.coalesce(F.length("body"), F.lit(0)).cast("bigint").alias("size")).cache()
    bucket_ms = F.floor(F.unix_millis("arrival_time") / F.lit(bucket * 1000)) * F.lit(bucket * 1000)
    rates = (messages.groupBy("address", F.timestamp_millis(bucket_ms.cast("bigint")).alias("bucket_start"))
             .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").cast("bigint").alias("bytes"))
             .withColumn("rate_per_s", F.col("messages").cast("double") / F.lit(float(bucket)))
             .orderBy("address", "bucket_start"))
    sizes = (messages.groupBy("address")
             .agg(F.count(F.lit(1)).alias("messages"),
                  F.min("size").alias("min_bytes"),
                  F.percentile_approx("size", 0.5, 100_000).alias("p50_bytes"),
                  F.percentile_approx("size", 0.9, 100_000).alias("p90_bytes"),
                  F.percentile_approx("size", 0.99, 100_000).alias("p99_bytes"),
                  F.max("size").alias("max_bytes"),
                  F.sum("size").cast("bigint").alias("bytes"),
                  F.min("arrival_time").alias("first"), F.max("arrival_time").alias("last"))
             .orderBy("address"))

    from hermod.broker.times import parse_time

    acks = _read(spark, request, "acknowledgements").where(F.col("address").isNotNull())
    if request.from_time:
        acks = acks.where(F.unix_millis("arrival_time") >= F.lit(parse_time(request.from_time)))
    if request.to_time:
        acks = acks.where(F.unix_millis("arrival_time") < F.lit(parse_time(request.to_time)))
    latency = (acks.groupBy("address")
               .agg(F.count(F.lit(1)).alias("acked"),
                    F.percentile_approx("latency_ms", 0.5, 100_000).cast("double").alias("p50_ms"),
                    F.percentile_approx("latency_ms", 0.9, 100_000).cast("double").alias("p90_ms"),
                    F.percentile_approx("latency_ms", 0.99, 100_000).cast("double").alias("p99_ms"))
               .orderBy("address"))
    dead = (_read(spark, request, "dead_letters")
            .groupBy("original_address", "reason").agg(F.count(F.lit(1)).alias("messages"))
            .orderBy("original_address", "reason"))

    _write(rates, out / "rates.parquet")
    size_rows = sizes.collect()
    _write(sizes.drop("bytes", "first", "last"), out / "sizes.parquet")
    latency_rows = latency.collect()
    _write(latency, out / "latency.parquet")
    dead_rows = dead.collect()
    _write(dead, out / "dead_letters.parquet")
    rate_rows = rates.collect()
    messages.unpersist()

    _chart(rate_rows, bucket, out / "rates.png")
    summary = _summary(request, size_rows, rate_rows, latency_rows, dead_rows)
    (out / "summary.txt").write_text(summary)
    return {"sizes": size_rows, "rates": rate_rows, "latency": latency_rows, "dead_letters": dead_rows}


def _write(df, path: Path) -> None:
    df.coalesce(1).write.mode("overwrite").parquet(str(path))


def _chart(rate_rows: list, bucket: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5), dpi=100)
    series: dict[str, dict] = {}
    for row in rate_rows:
        series.setdefault(row["address"], {})[row["bucket_start"]] = row["rate_per_s"]
    if series:
        start = min(t for points in series.values() for t in points)
        end = max(t for points in series.values() for t in points)
        from datetime import timedelta

        steps = int((end - start).total_seconds() // bucket) + 1
        times = [start + timedelta(seconds=bucket * i) for i in range(steps)]
        for address in sorted(series):
            points = series[address]
            # A rate holds for its whole bucket: steps, not lines between bucket starts.
            axes.step(times + [times[-1] + timedelta(seconds=bucket)],
                      [points.get(t, 0.0) for t in times] + [points.get(times[-1], 0.0)],
                      where="post", label=address)
        axes.legend(loc="upper left", fontsize="small")
    else:
        axes.text(0.5, 0.5, "no retained messages", ha="center", va="center",
                  transform=axes.transAxes)
    axes.set_title(f"Messages per second by address ({bucket} s buckets, UTC)")
    axes.set_xlabel("time (UTC)")
    axes.set_ylabel("messages/s")
    axes.grid(True, alpha=0.3)
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)


def _summary(request: Request, size_rows, rate_rows, latency_rows, dead_rows) -> str:
    peak: dict[str, float] = {}
    for row in rate_rows:
        peak[row["address"]] = max(peak.get(row["address"], 0.0), row["rate_per_s"])
    latency = {row["address"]: row for row in latency_rows}
    lines = []
    for row in size_rows:
        address = row["address"]
        tokens = [f"address={address}", f"messages={row['messages']}", f"bytes={row['bytes']}",
                  f"p50_bytes={row['p50_bytes']}", f"peak_rate_per_s={peak.get(address, 0.0):g}"]
        if address in latency:
            tokens += [f"acked={latency[address]['acked']}", f"p50_ms={latency[address]['p50_ms']:g}"]
        lines.append(" ".join(tokens))
    total = sum(row["messages"] for row in size_rows)
    total_bytes = sum(row["bytes"] for row in size_rows)
    window = f"from {request.from_time or 'the oldest retained message'} to {request.to_time or 'now'}"
    lines.append("")
    lines.append(f"{total} retained messages ({total_bytes} body bytes) on {len(size_rows)} "
                 f"addresses, {window}, in {request.bucket} s buckets.")
    if size_rows:
        busiest = max(size_rows, key=lambda r: r["messages"])
        lines.append(f"Busiest address: {busiest['address']} with {busiest['messages']} messages.")
    dead_total = sum(row["messages"] for row in dead_rows)
    if dead_total:
        parts = ", ".join(f"{r['original_address']} {r['reason']} {r['messages']}" for r in dead_rows)
        lines.append(f"{dead_total} messages went to a dead-letter address: {parts}.")
    else:
        lines.append("No message went to a dead-letter address.")
    if not latency_rows:
        lines.append("No acknowledgement times are recorded, so no latency figures.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="analyse.py", description="Hermod analytics job (Spark)"))
    args = parser.parse_args(argv)
    try:
        run(args)
    except AnalyseError as error:
        print(f"analyse: {error}", file=sys.stderr)
        return 2
    print(f"analysis written to {args.out}")
    return 0


if __name__ == "__main__":
    # Run as a file (`spark-submit pipeline/analyse.py`): make the repository importable when
    # hermod-broker is not installed in this Python.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
