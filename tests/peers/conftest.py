"""Fixtures for tests that compare Hermod with a real ActiveMQ Classic 5.17.2 broker (classic.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from classic import ClassicBroker, missing  # noqa: E402


@pytest.fixture
def start_classic(tmp_path):
    """`start_classic(persistent=..., security=...)` -> a started ClassicBroker under tmp_path;
    every one is stopped at the end. Skips the test when Classic is not installed."""
    why = missing()
    if why:
        pytest.skip(why)
    started: list[ClassicBroker] = []

    def start(**kwargs) -> ClassicBroker:
        b = ClassicBroker(tmp_path / f"classic-{len(started)}", **kwargs)
        started.append(b)
        return b.start()

    yield start
    for b in started:
        b.stop()
