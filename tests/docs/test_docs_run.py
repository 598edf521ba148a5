"""Docs that run (issue 33, item 6): every TOML block of the README and docs/, and the shipped
packaging/hermod.toml, passes `hermod config check` as written; the certificate steps of
docs/security.md, the README's quick-start commands and the Python recipe of docs/clients.md are
run as written against a real broker."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermod_testing import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the venv's bin: `hermod` as the docs call it


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), re.S | re.M)


def run_sh(script: str, cwd: Path, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=120, input=stdin,
                          env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})))
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done


def certificate_steps() -> str:
    [steps] = [b for b in blocks(ROOT / "docs" / "security.md", "sh") if "openssl" in b]
    return steps


TOML_BLOCKS = [pytest.param(text, id=f"{path.name}-{i}")
               for path in DOCS for i, text in enumerate(blocks(path, "toml"))]


@pytest.mark.parametrize("text", TOML_BLOCKS)
def test_every_toml_block_passes_config_check(tmp_path, text):
    if "[tls]" in text:  # the files it names, made by the documented steps
        run_sh(certificate_steps(), tmp_path)
    (tmp_path / "hermod.toml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "hermod.broker", "config", "check", "hermod.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{text}\n{done.stderr}"


def test_the_shipped_config_passes_config_check(tmp_path):
    """Its paths are a service's (/var/lib/hermod); here they point into a scratch folder."""
    text = (ROOT / "packaging" / "hermod.toml").read_text().replace("/var/lib/hermod", str(tmp_path))
    (tmp_path / "hermod.toml").write_text(text)
    done = subprocess.run([sys.executable, "-m", "hermod.broker", "config", "check", "hermod.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_certificate_steps_give_a_broker_a_client_verifies(tmp_path, start_broker):
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed (Debian's openssl package)")
    run_sh(certificate_steps(), tmp_path)
    [tls_block] = [b for b in blocks(ROOT / "docs" / "security.md", "toml") if "[tls]" in b]
    config = tmp_path / "tls.toml"
    config.write_text(tls_block)
    b = start_broker("--config", str(config), cwd=tmp_path)
    port = b.url.rsplit(":", 1)[1]
    [client] = [x for x in blocks(ROOT / "docs" / "security.md", "sh") if "--ca ca.crt" in x]
    done = run_sh(client.replace("localhost:5672", f"localhost:{port}"), tmp_path)
    assert done.stdout.split()[:2] == ["address", "queue"]


def test_user_commands_run_as_documented(tmp_path):
    [users] = [b for b in blocks(ROOT / "docs" / "security.md", "sh") if "hermod user add" in b]
    (tmp_path / "hermod.toml").write_text("")
    done = run_sh(users, tmp_path, stdin="a-password\n")
    assert "alice" in done.stdout
    assert "alice" not in (tmp_path / "hermod.toml").read_text()  # the last step deletes her


def test_quick_start_commands_run(start_broker, tmp_path):
    b = start_broker()
    [try_it] = [x for x in blocks(ROOT / "README.md", "sh") if "producer --address orders" in x]
    done = run_sh(try_it, ROOT, env={"HERMOD_URL": b.url})
    assert "sent 10 messages to orders" in done.stdout
    assert "received 10 messages from orders" in done.stdout + done.stderr


def test_the_python_recipe_runs(start_broker, tmp_path):
    b = start_broker()
    [recipe] = blocks(ROOT / "docs" / "clients.md", "python")
    script = tmp_path / "recipe.py"
    script.write_text(recipe.replace("amqp://127.0.0.1:5672", b.url))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"
