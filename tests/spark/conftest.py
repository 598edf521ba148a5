"""Fixtures for the data pipeline suite: one local SparkSession (`local[2]`) for the whole
session, real brokers (tests/conftest.py `start_broker`) and real stores, a SQLite file or a
fresh database of a private PostgreSQL cluster (tests/store/pgcluster.py, imported from where it
is). Spark needs PySpark and a Java 17/21 runtime: `make test` installs both; without them the
suite skips."""
from __future__ import annotations

import itertools
import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "store", TESTS / "wire", TESTS):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from pgcluster import PgCluster, find_bindir  # noqa: E402

_database_numbers = itertools.count(1)

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark (make test installs one)")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this venv's Python
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("hermod-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               # Short jobs on small data: a JVM that skips the optimising compiler starts and
               # warms up about twice as fast here.
               .config("spark.driver.extraJavaOptions", FAST_JVM)
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_pg_cluster():
    if find_bindir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    with PgCluster(durable=False) as cluster:
        yield cluster


@pytest.fixture
def sqlite_store(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'hermod.db'}"


@pytest.fixture
def pg_store(spark_pg_cluster):
    name = f"hermod_spark_{next(_database_numbers)}"
    url = spark_pg_cluster.create_database(name)
    yield url
    spark_pg_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request) -> str:
    """An empty store, once per back-end."""
    return request.getfixturevalue("sqlite_store" if request.param == "sqlite" else "pg_store")
