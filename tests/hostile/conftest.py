"""Fixtures for the hostile-client suite: a real `hermod run` per test (limits set in its config
file where the case needs them) and a `guard` (hostile_support.Guard) for the well-behaved side."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "wire", TESTS / "store", TESTS / "durable", TESTS,
                   Path(__file__).resolve().parent):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from hostile_support import Guard  # noqa: E402


@pytest.fixture
def hostile_broker(start_broker):
    """Start a broker for one case: `hostile_broker(config_text)`."""

    def start(config: str = ""):
        return start_broker(config=config)

    return start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.call_passed = report.passed
    return report


@pytest.fixture
def guarded(hostile_broker, request):
    """`guarded(config)` -> (broker, guard): the guard is connected, preloaded, one round trip
    done; teardown insists that the test called guard.verify()."""
    guards: list[Guard] = []

    def start(config: str = ""):
        broker = hostile_broker(config)
        guard = Guard(broker)
        guards.append(guard)
        guard.preload()
        guard.round_trip("before the attack")
        return broker, guard

    yield start
    for guard in guards:
        guard.close()
    if getattr(request.node, "call_passed", False):
        assert all(g.verified for g in guards), "the test did not call guard.verify()"
