"""Times as the data pipeline takes them (`hermod replay --from/--to`, the `hermod` data
source's `from`/`to` options, `hermod analyse`): ISO 8601 text to epoch milliseconds."""
from __future__ import annotations

from datetime import datetime, timezone


class TimeError(ValueError):
    """Text that is not an ISO 8601 time (one line)."""


def parse_time(value: str) -> int:
    """ISO 8601 text to epoch ms; no zone means UTC (`2026-05-01T12:00:00Z`, `2026-05-01`)."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise TimeError(f"invalid time {value!r}: use ISO 8601, e.g. 2026-05-01T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
