"""Helpers for the service tests: the config file a broker runs with, SIGHUP, and its JSON log."""
from __future__ import annotations

import json
import signal
from pathlib import Path

from hermod_testing import wait_for


def config_path(broker) -> Path:
    return Path(broker.args[broker.args.index("--config") + 1])


def log_records(broker) -> list[dict]:
    """The broker's stderr as JSON log records (stderr is a pipe: JSON lines)."""
    return [json.loads(line) for line in list(broker.stderr_lines) if line.strip()]


def logged(broker, text: str, level: str | None = None, timeout: float = 10) -> dict:
    def found():
        for r in log_records(broker):
            if text in r["msg"] and (level is None or r["level"] == level):
                return r
        return None
    return wait_for(found, timeout=timeout, message=f"log line {text!r}")


def count_logged(broker, text: str) -> int:
    return sum(text in r["msg"] for r in log_records(broker))


def reload_with(broker, text: str, outcome: str = "configuration reloaded") -> dict:
    """Write the new config file, SIGHUP, and wait for the reload's outcome line."""
    before = count_logged(broker, outcome)
    config_path(broker).write_text(text)
    broker.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: count_logged(broker, outcome) > before, message=outcome)
    return [r for r in log_records(broker) if outcome in r["msg"]][-1]


def http_base(broker) -> str:
    """The broker's HTTP listener, from its `hermod http on` readiness line."""
    import re
    return next(m.group(1) for line in broker.stdout_lines
                if (m := re.search(r"hermod http on (https?://\S+)", line)))


def metrics_text(broker) -> str:
    """GET /metrics on the broker's HTTP listener."""
    import urllib.request
    with urllib.request.urlopen(http_base(broker) + "/metrics", timeout=10) as resp:
        assert resp.status == 200
        return resp.read().decode()
