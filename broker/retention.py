"""Background purge of retained messages older than their address's `retention_days`.

The broker writes a `retained_messages` row for every accepted message of an address whose
settings have `retention_days > 0` (and an `acknowledgements` row when a consumer takes one).
This module removes rows whose arrival is more than N days old, N resolved per address with the
same settings repository the broker uses (so wildcards and specificity behave identically).

Theory of operation. The purge runs on its own daemon thread with its own engine, never on the
reactor thread and never through the journal's writer: it touches only retention rows, which
nothing in the broker reads back. Each DELETE removes at most `BATCH` rows in its own short
transaction, so on SQLite the write lock is held for milliseconds at a time and the journal's
writer (which waits up to its busy timeout) is never starved. An address whose settings now say
0 keeps its rows: turning retention off stops recording, it does not erase what was kept.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from hermod.store import retention as retention_rows
from hermod.store.retention import DAY_MS  # noqa: F401 - part of this module's interface

from .core.settings import SettingsRepository

log = logging.getLogger("hermod.retention")

BATCH = 5_000  # rows per DELETE statement (one short transaction each)
INTERVAL_S = 600.0  # between passes; the first pass runs right after start


@dataclass(frozen=True)
class PurgeResult:
    messages: int = 0
    acknowledgements: int = 0


def retention_configured(address_settings) -> bool:
    """True if any `[[address_settings]]` entry turns retention on."""
    return any(values.get("retention_days", 0) > 0 for _match, values in address_settings)


def purge(engine, settings: SettingsRepository, now_ms: int | None = None) -> PurgeResult:
    """One pass: for every address with retained rows, delete those older than its N days (and
    their acknowledgement records). Returns how many rows went."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    messages, acknowledgements = retention_rows.purge(
        engine, lambda address: settings.for_address(address).retention_days, now_ms, BATCH)
    return PurgeResult(messages, acknowledgements)


class RetentionPurger:
    """A daemon thread that runs `purge` at start and then every `interval_s` seconds."""

    def __init__(self, url: str, address_settings, interval_s: float = INTERVAL_S) -> None:
        self.url = url
        self.settings = SettingsRepository(list(address_settings))
        self.interval_s = interval_s
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hermod-retention", daemon=True)

    def start(self) -> RetentionPurger:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        from hermod.store.engine import make_engine

        engine = None
        try:
            engine = make_engine(self.url)
            while not self._stop.is_set():
                try:
                    result = purge(engine, self.settings)
                    if result.messages:
                        log.info("retention: purged %d messages and %d acknowledgements",
                                 result.messages, result.acknowledgements)
                except Exception as error:  # noqa: BLE001 - a failed pass is retried next time
                    log.warning("retention purge failed: %s", str(error).splitlines()[0])
                self.passes += 1
                self._stop.wait(self.interval_s)
        finally:
            if engine is not None:
                engine.dispose()


def start_purger(cfg, interval_s: float | None = None) -> RetentionPurger | None:
    """Start the purge thread when the store is a database and some address retains messages."""
    from hermod.store.engine import is_memory

    if is_memory(cfg.store.url) or not retention_configured(cfg.address_settings):
        return None
    return RetentionPurger(cfg.store.url, cfg.address_settings,
                           INTERVAL_S if interval_s is None else interval_s).start()
