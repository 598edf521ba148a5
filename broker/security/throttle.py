"""Password guessing, slowed the same way on every way in (AMQP SASL, HTTP Basic, and the other
protocols' logins): one `LoginThrottle` per broker.

The contract: the answer to a failed login waits 0.1 s, doubling with each consecutive failure
from that remote address up to 5 s; attempts in parallel from one address share that count; a
success resets it; password checks never run on the event loop and only a bounded number run at
once. How:

- Per address, attempts take turns (an asyncio.Lock per address): 800 parallel connections from
  one address are checked one after another, not 800 at once each with its own first 0.1 s.
- A failure sets the address's `free_at` (now + its delay) before the lock is let go, and the
  next turn first waits until then. The wait lives in that shared state, not in a sleep the
  failed attempt holds: a client that hangs up right after sending its guess cannot shorten the
  next guess's wait. A success answers at once; it only ever runs after the wait, so a guesser
  cannot learn "right" sooner than "wrong".
- The check (PBKDF2 for PLAIN and HTTP Basic; a couple of HMACs for SCRAM) runs in a small
  thread pool of MAX_CONCURRENT_CHECKS workers behind a semaphore of the same size, so a flood
  of logins from many addresses queues up rather than taking the loop or every core.

State per address is bounded (TRACKED_ADDRESSES; idle entries are forgotten first, and after
FORGET_AFTER_S a failure no longer counts as consecutive).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from .auth import Authenticator, Principal

log = logging.getLogger("hermod.security")

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 5.0
FORGET_AFTER_S = 600.0
TRACKED_ADDRESSES = 4096
# Password checks running at once, broker-wide: a PBKDF2 check of 4096 rounds is a few ms of one
# core; two keep a 2-core machine's loop responsive while a flood of logins waits its turn.
MAX_CONCURRENT_CHECKS = 2

T = TypeVar("T")


class _Address:
    __slots__ = ("failures", "free_at", "last", "turn", "users")

    def __init__(self) -> None:
        self.failures = 0
        self.free_at = 0.0  # monotonic time before which no attempt from here is checked
        self.last = 0.0
        self.turn = asyncio.Lock()
        self.users = 0  # attempts holding or waiting for the turn (such entries are never dropped)


class LoginFailed(Exception):
    """Missing or wrong credentials (HTTP answers 401 and asks for them again)."""

    def __init__(self, user: str | None):
        super().__init__(f"login failed for {user}" if user is not None else "credentials required")
        self.user = user


def failure_delay(failures: int) -> float:
    """How long the answer to the `failures`-th consecutive failure waits."""
    return min(FIRST_DELAY_S * 2 ** (failures - 1), MAX_DELAY_S)


class LoginThrottle:
    """`await check_plain(host, user, password)` for a user name and password (SASL PLAIN, HTTP
    Basic, STOMP/MQTT/OpenWire logins); `await attempt(host, check)` for any other check (a
    SCRAM proof, a login refused before any check)."""

    def __init__(self, auth: Authenticator, max_checks: int = MAX_CONCURRENT_CHECKS):
        self.auth = auth
        self.max_checks = max_checks
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None
        self._slots: asyncio.Semaphore | None = None

    async def check_plain(self, host: str, user: str | None, password: str | None) -> Principal | None:
        """The principal when `password` is `user`'s, else None, answered as the contract says."""
        if user is None or password is None:
            return await self.attempt(host, None)
        auth = self.auth
        return await self.attempt(host, lambda: auth.plain(user, password))

    async def attempt(self, host: str, check: Callable[[], T | None] | None) -> T | None:
        """Run `check` (a blocking function: off the loop) in `host`'s turn; None from it (or no
        check at all: a login already known to fail) is a failure, answered after the delay."""
        entry = self._entry(host)
        entry.users += 1
        try:
            async with entry.turn:
                wait = entry.free_at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                result = await self._run(check) if check is not None else None
                now = time.monotonic()
                if result is not None:
                    entry.failures, entry.free_at = 0, 0.0
                    return result
                if now - entry.last > FORGET_AFTER_S:
                    entry.failures = 0
                entry.failures += 1
                entry.last = now
                delay = failure_delay(entry.failures)
                entry.free_at = now + delay
            await asyncio.sleep(delay)  # the answer waits; the next attempt waits on free_at
            return None
        finally:
            entry.users -= 1

    def failures(self, host: str) -> int:
        entry = self._addresses.get(host)
        return entry.failures if entry is not None else 0

    async def _run(self, check: Callable[[], T]) -> T:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_checks)
            self._pool = ThreadPoolExecutor(self.max_checks, thread_name_prefix="hermod-login")
        async with self._slots:
            return await asyncio.get_running_loop().run_in_executor(self._pool, check)

    def _entry(self, host: str) -> _Address:
        entry = self._addresses.get(host)
        if entry is None:
            entry = self._addresses[host] = _Address()
            if len(self._addresses) > TRACKED_ADDRESSES:
                self._forget_one()
        else:
            self._addresses.move_to_end(host)
        return entry

    def _forget_one(self) -> None:
        """Drop the least recently used address nobody is waiting on (a busy one keeps its turn
        and its count; there are at most as many busy ones as open connections)."""
        for host, entry in self._addresses.items():
            if entry.users == 0:
                del self._addresses[host]
                return

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
