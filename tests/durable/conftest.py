"""Fixtures for the durable-store suite: real `hermod run` processes on a SQLite file or on a
fresh database of a private PostgreSQL cluster, restarted (SIGTERM or SIGKILL) on the same store.

The cluster comes from tests/store/pgcluster.py (its directory is put on sys.path; the file
stays where it is). One cluster serves the whole session; the tests that stop the server use a
cluster of their own module's (test_durable_faults.py). PostgreSQL tests skip only when no
server binaries are installed (`make test` installs them).
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "store", TESTS / "wire", TESTS / "http", TESTS):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from pgcluster import PgCluster  # noqa: E402

from durable_clients import DurableBrokers, ProcessStarter, require_postgresql  # noqa: E402

_database_numbers = itertools.count(1)

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def durable_pg_cluster():
    """One private cluster for the session (fsync off: these tests kill the broker, never the
    server, so the server's own durability is not what they check)."""
    require_postgresql()
    with PgCluster(durable=False) as cluster:
        yield cluster


def fresh_database(cluster: PgCluster) -> tuple[str, str]:
    name = f"hermod_durable_{next(_database_numbers)}"
    return name, cluster.create_database(name)


@pytest.fixture
def sqlite_store_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'hermod.db'}"


@pytest.fixture
def pg_store_url(durable_pg_cluster):
    name, url = fresh_database(durable_pg_cluster)
    yield url
    durable_pg_cluster.drop_database(name)


@pytest.fixture(params=BACKENDS)
def store_url(request) -> str:
    """An empty store, once per back-end: a SQLite file in tmp_path or a fresh PostgreSQL
    database on the session's cluster."""
    return request.getfixturevalue(f"{'sqlite' if request.param == 'sqlite' else 'pg'}_store_url")


@pytest.fixture
def brokers(start_broker, store_url) -> DurableBrokers:
    """Start, kill and restart brokers on `store_url` (see durable_clients.DurableBrokers)."""
    return DurableBrokers(start_broker, store_url)


@pytest.fixture(scope="module", params=BACKENDS)
def module_store_url(request, tmp_path_factory):
    """Like `store_url`, shared by one module's tests (a scenario set up once per back-end)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('store') / 'hermod.db'}"
        return
    cluster = request.getfixturevalue("durable_pg_cluster")
    name, url = fresh_database(cluster)
    yield url
    cluster.drop_database(name)


@pytest.fixture(scope="module")
def module_brokers(module_store_url, tmp_path_factory):
    starter = ProcessStarter(tmp_path_factory.mktemp("brokers"))
    yield DurableBrokers(starter.start, module_store_url)
    starter.stop_all()
