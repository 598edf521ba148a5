"""Fixtures for the shared-store HA tests: one private PostgreSQL cluster on loopback for the
module, a fresh database per test, and brokers that are all killed at the end."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from pgcluster import fresh_database, module_cluster  # noqa: E402

from ha_testing import HaNode  # noqa: E402

_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def ha_cluster():
    yield from module_cluster()


@pytest.fixture
def ha_db(ha_cluster):
    """(cluster, database name, store URL) of a fresh database."""
    yield from fresh_database(ha_cluster, f"hermod_ha_{next(_numbers)}")


@pytest.fixture
def nodes(tmp_path):
    """`nodes(name, store_url, **ha)`: a shared-store broker process (not yet waited on)."""
    started: list[HaNode] = []

    def start(node: str, store_url: str, **kwargs) -> HaNode:
        process = HaNode(node, store_url, tmp_path, **kwargs).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
