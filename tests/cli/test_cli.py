"""The `hermod` command line as a user runs it: real processes, real broker."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from hermod_testing import BrokerProcess


def hermod(*args: str, timeout: float = 60, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_producer_consumer_and_queue_stat_round_trip(broker):
    sent = hermod("producer", "--url", broker.url, "--address", "cli.q", "--count", "25", "--size", "64")
    assert sent.returncode == 0, sent.stderr
    assert "sent 25 messages" in sent.stdout
    stat = hermod("queue", "stat", "--url", broker.url)
    assert stat.returncode == 0, stat.stderr
    rows = [line.split() for line in stat.stdout.splitlines()[1:]]
    row = next(r for r in rows if r[1] == "cli.q")
    assert row == ["cli.q", "cli.q", "anycast", "true", "25", "0", "25", "0"]
    got = hermod("consumer", "--url", broker.url, "--address", "cli.q", "--count", "25", "--quiet")
    assert got.returncode == 0, got.stderr
    assert "received 25 messages" in got.stdout


def test_consumer_prints_each_message(broker):
    hermod("producer", "--url", broker.url, "--address", "cli.p", "--count", "2", "--size", "3")
    got = hermod("consumer", "--url", broker.url, "--address", "cli.p", "--count", "2")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[:2] == ["1: xxx", "2: xxx"]


def test_durable_consumer_resumes_its_subscription(broker):
    first = hermod("consumer", "--url", broker.url, "--address", "cli.t", "--count", "0", "--durable", "sub1")
    assert first.returncode == 0, first.stderr
    sent = hermod("producer", "--url", broker.url, "--address", "cli.t", "--count", "3", "--topic")
    assert sent.returncode == 0, sent.stderr
    again = hermod("consumer", "--url", broker.url, "--address", "cli.t", "--count", "3", "--durable", "sub1",
                   "--quiet", "--timeout", "10")
    assert again.returncode == 0, again.stderr
    assert "received 3 messages" in again.stdout


def run_expecting_failure(tmp_path, *args: str, config: str | None = None) -> subprocess.CompletedProcess:
    argv = ["run", "--store", "memory", *args]
    if config is not None:
        path = tmp_path / "bad.toml"
        path.write_text(config)
        argv += ["--config", str(path)]
    return hermod(*argv, timeout=30, cwd=tmp_path)


@pytest.mark.parametrize("config, expected", [
    ("[server]\nport = 'x'\n", "server.port: expected a port number"),
    ("[server]\nportt = 1\n", "server.portt: unknown key"),
    ("[[address]]\nname = 'a'\n  [[address.queue]]\n  name = 'q'\n  routing = 'sideways'\n",
     "address[0].queue[0].routing: expected one of anycast, multicast"),
    ("[[address_settings]]\nmatch = '#'\naddress_full_policy = 'explode'\n",
     "address_settings[0].address_full_policy: expected one of page, block, fail, drop"),
    ("[server\nport = 1\n", "invalid TOML"),
    ("[bogus]\n", "bogus: unknown key"),
])
def test_bad_config_is_one_clear_line_and_exit_2(tmp_path, config, expected):
    result = run_expecting_failure(tmp_path, config=config)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "bad.toml" in lines[0]


def test_toml_syntax_error_names_the_line(tmp_path):
    result = run_expecting_failure(tmp_path, config="[server]\nhost = '127.0.0.1'\nport = = 5\n")
    assert result.returncode == 2
    assert "line 3" in result.stderr


def test_missing_config_file_is_one_line(tmp_path):
    result = hermod("run", "--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nope.toml" in result.stderr


def test_port_in_use_is_one_clear_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = run_expecting_failure(tmp_path, "--port", str(port))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port}" in lines[0] and "in use" in lines[0]


def test_readiness_line_reports_the_real_port(tmp_path):
    b = BrokerProcess(["--port", "0", "--store", "memory"], tmp_path).start()
    try:
        # the HTTP listener (port 0 too, as the AMQP port is 0) prints its line first
        assert b.stdout_lines[0].startswith("hermod http on http://127.0.0.1:")
        assert not b.stdout_lines[0].strip().endswith(":0")
        assert b.stdout_lines[1].startswith("hermod listening on amqp://127.0.0.1:")
        assert not b.url.endswith(":0")
    finally:
        assert b.stop() == 0


def test_user_add_writes_a_hash_not_the_password(tmp_path):
    cfg = tmp_path / "hermod.toml"
    cfg.write_text("[server]\nport = 0\n")
    result = hermod("user", "add", "--config", str(cfg), "alice", "--password", "s3cret-pw",
                    "--role", "producer", "--role", "consumer")
    assert result.returncode == 0, result.stderr
    text = cfg.read_text()
    assert "s3cret-pw" not in text
    import tomllib
    from hermod.broker.security.passwords import verify_password
    user = tomllib.loads(text)["security"]["user"][0]
    assert user["name"] == "alice" and user["roles"] == ["producer", "consumer"]
    assert verify_password("s3cret-pw", user["password_hash"])
    assert not verify_password("wrong", user["password_hash"])
    # and the file is still a valid config
    from hermod.broker.config import load
    assert load(cfg).security["users"][0]["name"] == "alice"
