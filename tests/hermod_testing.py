"""Test support shared by every suite: a real `hermod run` process on port 0 (found through its
readiness line) and bounded waiting. Imported as a plain module; conftest.py only adds fixtures."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = re.compile(r"hermod listening on (amqps?://\S+)")


class BrokerProcess:
    """A broker subprocess; `url` is where it listens. Output is collected for assertions."""

    def __init__(self, args: list[str], cwd: Path, env: dict | None = None):
        self.args = args
        self.cwd = cwd
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.stderr_lines: list[str] = []
        self.stdout_lines: list[str] = []

    def start(self, timeout: float = 20) -> BrokerProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(self.env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "hermod.broker", "run", *self.args], cwd=self.cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        ready = threading.Event()

        def read_stdout():
            for line in self.proc.stdout:
                self.stdout_lines.append(line)
                m = READY.search(line)
                if m and self.url is None:
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        def read_stderr():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not ready.wait(timeout) or self.url is None:
            self.kill()
            raise RuntimeError("broker did not become ready:\n" + "".join(self.stderr_lines[-30:]))
        return self

    @property
    def address(self) -> str:
        return self.url.split("://", 1)[1]

    def stop(self, timeout: float = 15) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode if self.proc else 0

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(predicate, timeout: float = 10, interval: float = 0.01, message: str = "condition"):
    """Poll `predicate` until it is truthy, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(interval)
