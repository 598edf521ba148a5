"""The `HERMOD_*` environment overrides: read once, by config.py, over the configuration file;
a bad value is one line on stderr and exit 2 (never a traceback from an import-time read)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hermod.broker import config as config_mod


def hermod_run(tmp_path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", *extra],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, **env})


@pytest.mark.parametrize("variable, value", [
    ("HERMOD_HTTP_HEAD_TIMEOUT_S", "soon"),
    ("HERMOD_HTTP_HEAD_TIMEOUT_S", "0"),
    ("HERMOD_TRANSACTION_TIMEOUT_S", "soon"),
    ("HERMOD_TRANSACTION_TIMEOUT_S", "-1"),
    ("HERMOD_STORE_GIVE_UP_S", "soon"),
])
def test_a_bad_override_is_one_line_naming_the_variable_and_exit_2(tmp_path, variable, value):
    done = hermod_run(tmp_path, {variable: value})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("hermod: ") and variable in lines[0] and repr(value) in lines[0]


def test_the_overrides_win_over_the_file_and_the_defaults():
    parsed = config_mod.parse({"server": {"transaction_timeout_s": 300}, "store": {"give_up_s": 30}})
    env = {"HERMOD_TRANSACTION_TIMEOUT_S": "1.5", "HERMOD_STORE_GIVE_UP_S": "2",
           "HERMOD_HTTP_HEAD_TIMEOUT_S": "0.5", "UNRELATED": "x"}
    applied = config_mod.apply_environment(parsed, env)
    assert (applied.server.transaction_timeout_s, applied.store.give_up_s,
            applied.http.head_timeout_s) == (1.5, 2.0, 0.5)
    assert config_mod.apply_environment(parsed, {}) == parsed
    assert config_mod.Config().http.head_timeout_s == 10


# Who else in the broker and the store may look at the environment, and why; none reads a setting
# of the broker's own.
OTHER_READERS = {
    "broker/cli.py",  # argument defaults of the entry point (HERMOD_LOG_LEVEL, HERMOD_URL)
    "broker/bridge.py",  # a bridge's password, from the variable its `password_env` names
    "broker/cluster_forward.py",  # the cluster login's password, from [ha] cluster_password_env
    "broker/systemd.py",  # NOTIFY_SOCKET, the service manager's protocol
}


def test_only_config_py_reads_the_environment():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readers = {str(p.relative_to(root)) for folder in ("broker", "store") for p in (root / folder).rglob("*.py")
               if "os.environ" in p.read_text() or "getenv(" in p.read_text()}
    readers = {r for r in readers if not r.startswith("broker/tools/")}  # client tools, not the broker
    assert readers == {"broker/config.py"} | OTHER_READERS
