"""[ha] in the configuration, and the store lock's holder named by `node` (contract, "High
availability and bridges")."""
from __future__ import annotations

import subprocess
import sys

import pytest

from hermod.broker import config


def run(tmp_path, text: str, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "hermod.toml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--config", str(path),
                           "--port", "0", "--http-port", "-1", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("mode", ["shared-store", "cluster"])
@pytest.mark.parametrize("store", ["sqlite:///x.db", "memory"])
def test_shared_store_on_anything_but_postgresql_is_a_one_line_config_error(tmp_path, store, mode):
    result = run(tmp_path, f'[store]\nurl = "{store}"\n[ha]\nmode = "{mode}"\nnode = "a"\n')
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f'ha.mode: "{mode}" needs a PostgreSQL store' in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("mode", ["shared-store", "cluster"])
def test_shared_store_with_the_store_from_the_command_line_is_checked_too(tmp_path, mode):
    result = run(tmp_path, f'[ha]\nmode = "{mode}"\nnode = "a"\n', "--store", "sqlite:///y.db")
    assert result.returncode == 2
    assert f'ha.mode: "{mode}" needs a PostgreSQL store' in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("table, message", [
    ('mode = "active"', 'ha.mode: expected one of "off", "shared-store"'),
    ('mode = "shared-store"\nlease_s = 0.5', "ha.lease_s: expected a number of seconds, at least 1"),
    ('announce = "10.0.0.5:5672"', "ha.announce: expected an amqp:// or amqps:// URL"),
    ('nodes = "a"', "ha.nodes: unknown key"),
])
def test_bad_ha_values_are_named_by_path(table, message):
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        config.parse({"ha": dict(__import__("tomllib").loads(table))})


def test_shared_store_needs_a_node_name():
    with pytest.raises(config.ConfigError, match='ha.node: required with mode = "shared-store"'):
        config.parse({"store": {"url": "postgresql+psycopg://u@h/db"}, "ha": {"mode": "shared-store"}})


def test_a_second_broker_is_told_the_holders_node_name(tmp_path, start_broker):
    text = '[store]\nurl = "sqlite:///s.db"\n[ha]\nnode = "node-a"\n'
    start_broker(config=text, store=None)

    refused = run(tmp_path, text)

    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "in use by another broker: node-a" in refused.stderr, refused.stderr
