"""Shared fixtures: brokers started as real processes on port 0."""
from __future__ import annotations

from pathlib import Path

import os

import pytest
from hypothesis import settings

from hermod_testing import BrokerProcess

# CI runs the same examples every time (a failure is then reproducible, never a flake);
# HYPOTHESIS_PROFILE=explore searches afresh.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

@pytest.fixture
def start_broker(tmp_path):
    """Start brokers with given extra args / config text; all are stopped at the end."""
    started: list[BrokerProcess] = []

    def start(*args: str, config: str | None = None, store: str = "memory", cwd: Path | None = None,
              env: dict | None = None) -> BrokerProcess:
        argv = ["--port", "0"]
        if config is not None:
            cfg = tmp_path / f"hermod-{len(started)}.toml"
            cfg.write_text(config)
            argv += ["--config", str(cfg)]
        if store is not None:
            argv += ["--store", store]
        b = BrokerProcess([*argv, *args], cwd or tmp_path, env).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture(scope="module")
def start_module_broker(tmp_path_factory):
    """`start_broker` for a whole test module: one broker many tests share (a matrix of cases
    that each use addresses of their own). Stopped when the module's tests are done."""
    started: list[BrokerProcess] = []
    directory = tmp_path_factory.mktemp("module-broker")

    def start(*args: str, config: str | None = None, store: str = "memory") -> BrokerProcess:
        argv = ["--port", "0"]
        if config is not None:
            cfg = directory / f"hermod-{len(started)}.toml"
            cfg.write_text(config)
            argv += ["--config", str(cfg)]
        if store is not None:
            argv += ["--store", store]
        b = BrokerProcess([*argv, *args], directory).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def broker(start_broker):
    """A broker with the default configuration and the in-memory store."""
    return start_broker()
