"""[ha] mode = "cluster" in the configuration: one line on stderr and exit 2 for what cannot
work (a store other than PostgreSQL: tests/ha/test_ha_config.py, for both modes), and two
processes with one node name refuse each other."""
from __future__ import annotations

import subprocess
import sys

import pytest

from hermod.broker import config


def run(tmp_path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "hermod.toml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--config", str(path),
                           "--port", "0", "--http-port", "-1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("table, message", [
    ('mode = "clustered"', 'ha.mode: expected one of "off", "shared-store", "cluster"'),
    ('mode = "cluster"\nlease_s = 0', "ha.lease_s: expected a number of seconds, at least 1"),
    ('mode = "cluster"\nannounce = "host:5672"', "ha.announce: expected an amqp:// or amqps:// URL"),
    ('mode = "cluster"\ncluster_user = "node"', "ha.cluster_password_env: required with cluster_user"),
    ('mode = "cluster"\ncluster_password_env = "PW"', "ha.cluster_user: required with cluster_password_env"),
])
def test_bad_cluster_values_are_named_by_path(table, message):
    with pytest.raises(config.ConfigError, match=message):
        config.parse({"ha": dict(__import__("tomllib").loads(table))})


def test_cluster_needs_a_node_name():
    with pytest.raises(config.ConfigError, match='ha.node: required with mode = "cluster"'):
        config.parse({"store": {"url": "postgresql+psycopg://u@h/db"}, "ha": {"mode": "cluster"}})


def test_a_second_process_with_the_same_node_name_is_refused_in_one_line(tmp_path, scale_db,
                                                                         cluster_nodes):
    url = scale_db[2]
    cluster_nodes("node-a", url).wait_ready()
    refused = run(tmp_path, f'[store]\nurl = "{url}"\n[ha]\nmode = "cluster"\nnode = "node-a"\n')
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "node name 'node-a' is in use by another live broker" in refused.stderr


def test_a_cluster_password_variable_that_is_not_set_stops_the_start_in_one_line(tmp_path, scale_db):
    url = scale_db[2]
    refused = run(tmp_path, f'[store]\nurl = "{url}"\n[ha]\nmode = "cluster"\nnode = "node-a"\n'
                            'cluster_user = "node"\ncluster_password_env = "HERMOD_TEST_UNSET_PW"\n')
    assert refused.returncode == 2
    assert refused.stderr == ("hermod: ha.cluster_password_env: environment variable "
                              "HERMOD_TEST_UNSET_PW is not set\n")
