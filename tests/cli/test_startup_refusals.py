"""Start-up refusals an operator meets after an ordinary install: one line on stderr, exit 2,
never a traceback (issue 33, finding 2)."""
from __future__ import annotations

import os
import subprocess
import sys


def _hermod(*args: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=dict(os.environ, **(env or {})))


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    # Log records (JSON lines: stderr is not a terminal) may come first; the refusal is one line.
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith('{"ts"')]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_audit_log_that_cannot_be_written_is_one_line(tmp_path):
    config = tmp_path / "hermod.toml"
    config.write_text(f'[security]\naudit_log = "{tmp_path}/missing-dir/audit.log"\n')
    line = _one_line(_hermod("run", "--port", "0", "--http-port", "-1", "--store", "memory",
                             "--config", str(config), cwd=tmp_path))
    assert "security.audit_log" in line and "missing-dir/audit.log" in line


def test_an_audit_log_failure_leaves_the_sqlite_store_usable(tmp_path):
    """The store was opened (and locked) before the audit log: the refusal lets it go."""
    config = tmp_path / "hermod.toml"
    config.write_text(f'[security]\naudit_log = "{tmp_path}/missing-dir/audit.log"\n')
    store = f"sqlite:///{tmp_path}/h.db"
    _one_line(_hermod("run", "--port", "0", "--http-port", "-1", "--store", store, "--config", str(config),
                      cwd=tmp_path))
    upgraded = _hermod("db", "upgrade", "--store", store, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr


def test_a_postgresql_store_without_its_driver_is_one_line(tmp_path):
    """`make install` has no PostgreSQL driver: a package named psycopg that fails to import
    stands in for the missing one (first on the path)."""
    shadow = tmp_path / "shadow" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('psycopg is not installed here')\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))}
    url = "postgresql://hermod:s3cret@127.0.0.1:1/hermod"
    for argv in (("run", "--port", "0", "--http-port", "-1", "--store", url), ("db", "upgrade", "--store", url)):
        line = _one_line(_hermod(*argv, cwd=tmp_path, env=env))
        assert "psycopg" in line and "hermod-broker[postgresql]" in line
        assert "s3cret" not in line
