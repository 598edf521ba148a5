"""Fixtures for the bridge tests: brokers run from a config text, on a chosen port (a remote
restarted after kill -9 must come back where the bridge's url points)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hermod_testing import BrokerProcess  # noqa: E402


@pytest.fixture
def run_broker(tmp_path):
    started: list[BrokerProcess] = []

    def run(name: str, config: str, *, port: int = 0, store: str = "memory", env: dict | None = None,
            http: bool = False) -> BrokerProcess:
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(config)
        args = ["--port", str(port), "--config", str(cfg), "--store", store,
                "--http-port", "0" if http else "-1"]
        b = BrokerProcess(args, tmp_path, env).start()
        started.append(b)
        return b

    yield run
    for b in started:
        b.stop()
