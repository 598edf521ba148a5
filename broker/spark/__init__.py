"""Hermod on Apache Spark: the `hermod` PySpark data source (format `hermod`).

    import hermod.broker.spark
    hermod.broker.spark.register(spark)          # harmless twice; also found without it (pyspark_hermod)
    df = spark.read.format("hermod").option("store", "sqlite:///hermod-data/hermod.db").load()

Importing this package costs nothing: PySpark is imported only when the data source is used.
"""
from __future__ import annotations


def data_source():
    """The DataSource class (imports PySpark)."""
    from .source import HermodDataSource

    return HermodDataSource


def register(spark) -> None:
    """Register format `hermod` in a SparkSession (registering again replaces it: harmless)."""
    spark.dataSource.register(data_source())


__all__ = ["register", "data_source"]
