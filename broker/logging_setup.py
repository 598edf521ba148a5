"""Where `hermod run` logs: stderr, as JSON lines for a log collector or plain text for a person.

The choice (contract, Operations): `--log-format json` or `text` decides; by default JSON when
stderr is not a terminal (systemd's journal, a container runtime, a pipe) and text on one. A JSON
line is one object: `ts` (ISO 8601, UTC), `level`, `logger`, `msg`, then any fields a caller gave
through `extra=` and `exc` with the traceback. One record is always one line, so a collector never
splits a message. The readiness lines are not logs: they stay plain on stdout.
"""
from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

FORMATS = ("auto", "json", "text")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from `extra=` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def wants_json(choice: str, stream) -> bool:
    if choice == "json":
        return True
    if choice == "text":
        return False
    isatty = getattr(stream, "isatty", None)
    return not (isatty is not None and isatty())


def configure(level: str = "info", choice: str = "auto", stream=None) -> None:
    """Install the one stderr handler on the root logger (replacing any earlier one)."""
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if wants_json(choice, stream) else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("alembic").setLevel(logging.WARNING)
