"""The audit log: one JSON object per line (logins, failed logins, refused connections,
permission denials, management actions) appended to the file `[security] audit_log` names.
The file is created readable by its owner only. Events are rare (not per message, except a
relay link's denials), so writing on the loop's thread is fine."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..config import ConfigError


class AuditLog:
    def __init__(self, path: Path):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as e:  # a start-up error: one line naming the key, exit 2
            raise ConfigError(f"security.audit_log: cannot open {path}: {e.strerror}") from None
        self._file = os.fdopen(fd, "a", buffering=1, encoding="utf-8")

    def __call__(self, event: str, **fields) -> None:
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
                  "event": event, **fields}
        self._file.write(json.dumps(record, default=str) + "\n")

    def close(self) -> None:
        self._file.close()


def no_audit(event: str, **fields) -> None:
    """Stands in when no audit log is configured."""
