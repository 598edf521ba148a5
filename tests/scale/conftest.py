"""Fixtures for the several-live-brokers store tests: one private PostgreSQL cluster for the
module, a fresh migrated database per test, and engines that are all disposed at the end."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from pgcluster import fresh_database, module_cluster  # noqa: E402

from hermod.store import schema  # noqa: E402
from hermod.store.engine import make_engine  # noqa: E402

_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def scale_cluster():
    yield from module_cluster()


@pytest.fixture
def scale_db(scale_cluster):
    """(cluster, database name, store URL) of a fresh migrated database."""
    yield from fresh_database(scale_cluster, f"hermod_scale_{next(_numbers)}", schema.upgrade)


@pytest.fixture
def engines():
    """`engines(url)`: a new engine (one per simulated broker process), disposed at the end."""
    made = []

    def make(url: str):
        engine = make_engine(url)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture
def cluster_nodes(tmp_path):
    """`cluster_nodes(name, store_url, **kw)`: a cluster node process (not yet waited on)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cluster_testing import ClusterNode

    started = []

    def start(node: str, store_url: str, **kwargs):
        process = ClusterNode(node, store_url, tmp_path, **kwargs).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
