"""Spark 4 registers the `DefaultSource` of every top-level `pyspark_*` module it finds in its
workers' Python, so `spark.read.format("hermod")` works with no register call. Spark imports this
module on every lookup: the data source (and PySpark) are imported only when asked for."""
from __future__ import annotations


def __getattr__(name: str):
    if name == "DefaultSource":
        from hermod.broker.spark.source import HermodDataSource

        return HermodDataSource
    raise AttributeError(f"module 'pyspark_hermod' has no attribute {name!r}")
