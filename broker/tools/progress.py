"""A progress line for long CLI operations (queue move, purge, retry; replay): on stderr, only when
stderr is a terminal or `--progress` asks. On a terminal the line is redrawn in place; elsewhere
each update is its own line, at most one a second, so a log keeps a readable trace. The last
update is always written."""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable

TERMINAL_EVERY_S = 0.1
LOG_EVERY_S = 1.0


class Progress:
    def __init__(self, label: str, enabled: bool | None = None, stream=None, clock=time.monotonic,
                 unit: str = "messages"):
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = self.terminal if enabled is None else enabled
        self.label = label
        self.unit = unit
        self._clock = clock
        self._last = None
        self._shown = ""

    def update(self, done: int, total: int | None = None, final: bool = False) -> None:
        if not self.enabled:
            return
        now = self._clock()
        every = TERMINAL_EVERY_S if self.terminal else LOG_EVERY_S
        if not final and self._last is not None and now - self._last < every:
            return
        self._last = now
        text = f"{self.label}: {done}"
        if total:
            text += f" of {total} {self.unit} ({min(100, done * 100 // total)}%)"
        else:
            text += f" {self.unit}"
        if text == self._shown and not final:
            return
        self._shown = text
        if self.terminal:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def while_running(work: Callable[[], object], poll: Callable[[], int], progress: Progress,
                  total: int | None, interval: float = 0.2):
    """Run `work` (a blocking call) on a thread and report `poll()` (how many are done so far)
    until it returns; its result or exception is the caller's."""
    if not progress.enabled:
        return work()
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller below
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    progress.update(0, total)
    polling = True
    while True:
        thread.join(interval)
        if not thread.is_alive():
            break
        if polling:
            try:
                progress.update(poll(), total)
            except Exception as e:  # noqa: BLE001 - said once; the operation itself carries on
                progress.stream.write(f"{progress.label}: no progress figures ({e})\n")
                polling = False
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
