"""Fixtures for the store tests: real SQLite files and a private PostgreSQL cluster.

The cluster is started once per session (`pg_cluster`); each test that needs PostgreSQL gets a
fresh database (`pg_url`). Tests that stop the server use another cluster
(`private_pg_cluster`). Both skip only when no PostgreSQL server binaries are installed
(`make test` installs them).
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pgcluster import PgCluster, find_bindir  # noqa: E402

from hermod import store  # noqa: E402

_database_numbers = itertools.count(1)


def _require_postgresql() -> None:
    if find_bindir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")


@pytest.fixture(scope="session")
def pg_cluster():
    _require_postgresql()
    with PgCluster(durable=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def _stoppable_pg_cluster():
    _require_postgresql()
    with PgCluster(durable=False) as cluster:
        yield cluster


@pytest.fixture
def private_pg_cluster(_stoppable_pg_cluster):
    """A cluster apart from the session's, for tests that stop and start the server (shared by
    one module's tests; each finds it running)."""
    if not _stoppable_pg_cluster.running:
        _stoppable_pg_cluster.start()
    yield _stoppable_pg_cluster
    if not _stoppable_pg_cluster.running:
        _stoppable_pg_cluster.start()


@pytest.fixture
def pg_url(pg_cluster):
    name = f"hermod_test_{next(_database_numbers)}"
    url = pg_cluster.create_database(name)
    yield url
    pg_cluster.drop_database(name)


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'hermod.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request):
    """The URL of an empty store, once per back-end."""
    return request.getfixturevalue({"sqlite": "sqlite_url", "postgresql": "pg_url"}[request.param])


@pytest.fixture
def open_store():
    """Opens journals (completions called directly on the writer thread) and closes them all
    at the end of the test."""
    opened = []

    def open_(url: str, post=None, **options):
        journal = store.open_journal(url, post, **options)
        opened.append(journal)
        return journal

    yield open_
    for journal in opened:
        journal.close()
