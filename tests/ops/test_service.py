"""The broker as a service (contract, Operations): JSON-lines logs off a terminal and plain text on
one, systemd Type=notify over a real AF_UNIX datagram socket (path and abstract names), the unit
file, and `hermod --version`."""
from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from importlib import metadata

import pytest

from hermod_testing import ROOT, wait_for
from ops_support import logged, reload_with

BAD_TOML = "[[address]\n"


def hermod(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, **kw)


def test_version_is_the_package_metadata_version():
    result = hermod("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"hermod {metadata.version('hermod-broker')}\n"


# -- logs ------------------------------------------------------------------------------------------


def test_logs_are_json_lines_when_stderr_is_not_a_terminal(start_broker):
    b = start_broker(config="")
    reload_with(b, BAD_TOML, outcome="configuration reload failed")
    record = logged(b, "configuration reload failed")
    assert set(record) >= {"ts", "level", "logger", "msg"}
    assert record["level"] == "ERROR" and record["logger"] == "hermod.reload"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", record["ts"])
    # Every line is one JSON object, and the readiness line stays plain on stdout.
    assert all(json.loads(line) for line in b.stderr_lines if line.strip())
    assert b.stdout_lines[-1].startswith("hermod listening on amqp://")


def test_log_format_text_forces_plain_lines(start_broker):
    b = start_broker("--log-format", "text", config="")
    b.proc.send_signal(signal.SIGHUP)
    line = wait_for(lambda: next((l for l in b.stderr_lines if "configuration reloaded" in l), None))
    assert " INFO hermod.reload: configuration reloaded from " in line
    assert not line.lstrip().startswith("{")


def _stderr_on_a_terminal(tmp_path, *extra: str) -> tuple[subprocess.Popen, int]:
    """A broker whose stderr is a pseudo-terminal; returns it and the terminal's reading end."""
    cfg = tmp_path / "hermod.toml"
    cfg.write_text("")
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", "memory",
                             "--config", str(cfg), "--http-port", "-1", *extra], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=child_fd, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    os.close(child_fd)
    return proc, main_fd


def _read_terminal_until(fd: int, text: str, timeout: float = 10) -> str:
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        assert time.monotonic() < deadline, f"no {text!r} on the terminal: {seen!r}"
        import select
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            seen += os.read(fd, 4096)
    return seen.decode()


@pytest.mark.parametrize("extra, json_expected", [((), False), (("--log-format", "json"), True)])
def test_on_a_terminal_logs_are_plain_unless_json_is_asked(tmp_path, extra, json_expected):
    proc, fd = _stderr_on_a_terminal(tmp_path, *extra)
    try:
        assert proc.stdout.readline().startswith("hermod listening on amqp://")
        proc.send_signal(signal.SIGHUP)
        seen = _read_terminal_until(fd, "configuration reloaded")
        line = next(l for l in seen.splitlines() if "configuration reloaded" in l)
        if json_expected:
            assert json.loads(line)["msg"].startswith("configuration reloaded from ")
        else:
            assert " INFO hermod.reload: configuration reloaded from " in line
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        os.close(fd)


# -- systemd ---------------------------------------------------------------------------------------


class NotifySocket:
    """The service manager's end: a datagram socket the broker writes its states to."""

    def __init__(self, address):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(15)

    def next(self) -> str:
        return self.sock.recv(4096).decode()

    def until(self, state: str) -> list[str]:
        got = []
        while state not in got:
            got.extend(self.next().split("\n"))
        return got

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_notify_ready_watchdog_and_stopping(start_broker, tmp_path, abstract):
    if abstract:
        name = f"hermod-test-{os.getpid()}-{time.monotonic_ns()}"
        manager, env_value = NotifySocket(b"\0" + name.encode()), "@" + name
    else:
        path = tmp_path / "notify.sock"
        manager, env_value = NotifySocket(str(path)), str(path)
    try:
        b = start_broker(config="", env={"NOTIFY_SOCKET": env_value, "WATCHDOG_USEC": "200000"})
        first = manager.until("READY=1")
        assert first[0] == "READY=1" and any(s.startswith("STATUS=listening on amqp://") for s in first)
        # Pings every half WATCHDOG_USEC (0.1 s): a few arrive, and keep coming.
        assert manager.next() == "WATCHDOG=1"
        assert manager.next() == "WATCHDOG=1"
        b.proc.send_signal(signal.SIGTERM)
        assert "STOPPING=1" in manager.until("STOPPING=1")
        assert b.proc.wait(15) == 0
    finally:
        manager.close()


@pytest.fixture
def notified(start_broker, tmp_path):
    """A broker with NOTIFY_SOCKET (no watchdog) and the manager's socket, READY=1 read."""
    path = tmp_path / "notify.sock"
    manager = NotifySocket(str(path))
    b = start_broker(config="", env={"NOTIFY_SOCKET": str(path)})
    assert manager.next().startswith("READY=1")
    yield b, manager
    manager.close()


def test_no_watchdog_pings_without_watchdog_usec(notified):
    b, manager = notified
    b.proc.send_signal(signal.SIGTERM)
    assert manager.next() == "STOPPING=1"  # nothing in between: no WATCHDOG=1


def test_sighup_tells_systemd_reloading_then_ready(notified):
    b, manager = notified
    b.proc.send_signal(signal.SIGHUP)
    assert manager.next() == "RELOADING=1"
    assert manager.next() == "READY=1"


def test_systemd_unit_is_type_notify_with_watchdog_restart_and_hardening():
    result = hermod("systemd-unit", "--config", "/etc/hermod/main.toml", "--exec", "/opt/hermod/bin/hermod")
    assert result.returncode == 0, result.stderr
    unit = result.stdout
    sections = re.findall(r"^\[(\w+)\]$", unit, re.M)
    assert sections == ["Unit", "Service", "Install"]
    keys = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line)
    assert keys["Type"] == "notify"
    assert keys["ExecStart"] == "/opt/hermod/bin/hermod run --config /etc/hermod/main.toml"
    assert keys["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert keys["Restart"] == "on-failure"
    assert int(keys["WatchdogSec"]) > 0
    for hardening in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert hardening in keys


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_logs_one_line_with_its_reason(start_broker, sig):
    """Issue 33, finding 12: nothing was logged at shutdown."""
    b = start_broker()
    b.proc.send_signal(sig)
    assert b.proc.wait(15) == 0
    wait_for(lambda: any("hermod stopping" in line for line in b.stderr_lines), message="the shutdown line")
    lines = [line for line in b.stderr_lines if "hermod stopping" in line]
    assert len(lines) == 1 and f"{sig.name} received" in lines[0], lines


def test_a_cli_management_call_logs_no_queue_expiry(start_broker):
    """Issue 33, finding 12: every CLI call left `queue <uuid> expired` at INFO (its reply queue)."""
    b = start_broker("--log-level", "info")
    for _ in range(3):
        assert hermod("queue", "stat", "--url", b.url).returncode == 0
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(15) == 0
    wait_for(lambda: any("hermod stopping" in line for line in b.stderr_lines), message="the shutdown line")
    assert not [line for line in b.stderr_lines if "expired" in line]
