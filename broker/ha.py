"""Shared-store high availability on the reactor ([ha] mode = "shared-store", PostgreSQL).

Theory of operation. The lease itself (its SQL, and the fence every commit runs) is
`store.lease`; this module decides when a broker serves.

- Backup (`wait_as_backup`): the main listener and the HTTP listener are bound at once (so
  clients and `/health` get an answer, and port 0 is settled), but every AMQP connection is
  closed with `amqp:connection:redirect` naming the live node, and every HTTP request gets 503.
  Every renew period the backup refreshes its row in `ha_backups` and tries to take the lease.
  Once it has it, both listeners are closed and `hermod run` starts the live broker on the
  same ports (recovery, then the readiness line).
- Live (`LeaseKeeper`): a thread renews the lease every period (at most a second) and reads
  the backups; the reactor checks, on a timer and at every connection's open, that the last
  renewal SENT is less than `lease_s - margin` old. Measured on this host's monotonic clock from
  before the request left, that is earlier than the expiry the database computed, so the broker
  stops (listeners and connections closed) before its lease can expire, and a paused broker
  that wakes up stops before it serves anything. The renewal runs on a thread of its own because
  recovery blocks the reactor for as long as it reads the store.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

from .protocol.binding import PropertyDict, symbol

from hermod.store.errors import StoreError
from hermod.store.lease import Lease, LiveNode

from .protocol import conditions

log = logging.getLogger("hermod.ha")

REDIRECT = "amqp:connection:redirect"
FAILOVER_SERVER_LIST = symbol("failover-server-list")


def renew_period(lease_s: float) -> float:
    """Every second, or more often for a short lease (at least four tries per lease)."""
    return min(1.0, lease_s / 4)


def safety_margin(lease_s: float) -> float:
    """How long before the lease's expiry a live broker that could not renew stops serving."""
    return max(0.5, lease_s / 4)


endpoint = conditions.endpoint  # an announce URL as a redirect's info map


# -- what the listeners say while this broker is not (or no longer) live ----------------------


class Redirector:
    """The Server's gate on a backup: every connection is sent to the live node."""

    def __init__(self) -> None:
        self.live: LiveNode | None = None

    def open_properties(self) -> dict:
        return {}

    def refusal(self) -> tuple[str, str, PropertyDict | None]:
        live = self.live
        if live is None or not live.announce:
            return (conditions.CONNECTION_FORCED, "this broker is a backup and no live broker "
                    "holds the store lease right now; try again", None)
        return (REDIRECT, f"this broker is a backup; the live broker is {live.node} at "
                f"{live.announce}", endpoint(live.announce))


async def backup_http(request):
    """The backup's whole HTTP API: 503 for /health and for everything else."""
    from .http.server import Response
    if request.path == "/health":
        return Response.json(503, {"status": "backup"})
    return Response.error(503, "this broker is a backup waiting for the store lease")


async def wait_as_backup(lease: Lease, announce: str, redirector: Redirector,
                         say: Callable[[str], None]) -> float:
    """Until this broker holds the lease: keep its backup row fresh, learn who is live (for
    the redirects), try to take the lease. The first attempt comes before anything is said,
    so a broker that finds the lease free never calls itself a backup. Returns the monotonic
    time the winning attempt was sent (the lease runs from no earlier than that)."""
    loop = asyncio.get_running_loop()
    period = renew_period(lease.lease_s)
    announced = False
    failing = False
    while True:
        try:
            sent = time.monotonic()
            if await loop.run_in_executor(None, lease.try_take):
                return sent
            await loop.run_in_executor(None, lease.register_backup, announce)
            redirector.live = await loop.run_in_executor(None, lease.live)
            failing = False
        except StoreError as error:
            if not failing:
                log.warning("backup %s: %s; trying again", lease.node, error)
            failing = True
        if not announced and redirector.live is not None:
            announced = True
            say(f"hermod backup of {redirector.live.node}, waiting for the store lease")
        await asyncio.sleep(period)


# -- the live broker's side ------------------------------------------------------------------


class LeaseKeeper:
    """Renews the lease on a thread; the Server's gate on the live broker (see the module
    docstring). `on_lost(reason)` runs on the reactor, once."""

    def __init__(self, lease: Lease, taken_at: float) -> None:
        self.lease = lease
        self._period = renew_period(lease.lease_s)
        self._margin = safety_margin(lease.lease_s)
        # monotonic time before which this broker may serve: taken_at is before the take was sent
        self.valid_until = taken_at + lease.lease_s - self._margin
        self.failover: list[PropertyDict] = []
        self.lost_reason: str | None = None  # set by the renewing thread
        self._reported = False
        self._on_lost: Callable[[str], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name="hermod-lease", daemon=True)
        self._thread.start()

    def watch(self, loop: asyncio.AbstractEventLoop, on_lost: Callable[[str], None]) -> None:
        """From now on (the broker serves), stop it the moment the lease may be gone."""
        self._loop = loop
        self._on_lost = on_lost
        self._check()

    def still_valid(self) -> bool:
        return self.lost_reason is None and time.monotonic() < self.valid_until

    # -- the Server's gate -------------------------------------------------------------------

    def open_properties(self) -> dict:
        return {FAILOVER_SERVER_LIST: list(self.failover)} if self.failover else {}

    def refusal(self) -> tuple[str, str, None] | None:
        if self.still_valid():
            return None
        self._lose(self.lost_reason or "the store lease could not be renewed in time")
        return (conditions.CONNECTION_FORCED, "this broker lost the store lease", None)

    # -- internals ---------------------------------------------------------------------------

    def _check(self) -> None:
        self._timer = None
        if self._reported or self._loop is None:
            return
        if not self.still_valid():
            self._lose(self.lost_reason or "the store lease could not be renewed in time")
            return
        self._timer = self._loop.call_at(min(self.valid_until, time.monotonic() + self._period),
                                         self._check)

    def _lose(self, reason: str) -> None:
        if self._on_lost is None or self._reported:
            return
        self._reported = True
        self.valid_until = 0.0
        self._stop.set()
        self._on_lost(reason)

    def _renew_loop(self) -> None:
        failing = False
        while not self._stop.wait(self._period):
            sent = time.monotonic()
            try:
                held = self.lease.renew()
            except StoreError as error:
                if not failing:
                    log.warning("store lease not renewed (%s); this broker stops serving in "
                                "%.1f s unless a renewal succeeds", error,
                                max(0.0, self.valid_until - time.monotonic()))
                failing = True
                continue
            if not held:
                self._lost_from_thread("the store lease was taken by another broker")
                return
            if failing:
                log.warning("store lease renewed again")
            failing = False
            self.valid_until = sent + self.lease.lease_s - self._margin
            try:
                self.failover = [endpoint(a) for a in self.lease.backups()]
            except StoreError:
                pass  # the list stays as it was; the next renewal tries again

    def _lost_from_thread(self, reason: str) -> None:
        self.valid_until = 0.0
        if self.lost_reason is None:
            self.lost_reason = reason
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._lose, reason)
            except RuntimeError:  # the loop is closed: the broker is stopping anyway
                pass

    def stop(self, resign: bool) -> None:
        """The broker is stopping: no more renewals; `resign` ends the lease now (a graceful
        stop) so that a backup takes over without waiting for it to expire."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
        self._thread.join(timeout=self.lease.lease_s)
        if resign and not self._reported and self.lost_reason is None:
            self.lease.resign()
        else:
            self.lease.close()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# -- `hermod run` with [ha] mode = "shared-store" ---------------------------------------------


async def become_live(cfg, http_port: int | None, shown_host: Callable[[str, str], str]):
    """Wait as a backup until this broker holds the lease (see the module docstring). Returns
    the configuration with the ports the backup bound (the live broker takes the same ones),
    the HTTP port, and the LeaseKeeper, already renewing; or None if told to stop first.
    Raises StoreError (one line) when the store cannot be used, and OSError when a port
    cannot be bound."""
    from dataclasses import replace

    from hermod.store import schema
    from hermod.store.engine import display_url, make_engine
    from hermod.store.lock import acquire

    from .app import Broker
    from .http.listener import start_http
    from .protocol.server import Server

    loop = asyncio.get_running_loop()
    node = cfg.ha.node
    engine = make_engine(cfg.store.url)
    where = display_url(engine.url)
    lock = None
    try:
        # Held shared while this broker waits, so that a broker without [ha] cannot open the
        # store under a backup; the journal takes its own when this one goes live.
        lock = await loop.run_in_executor(None, acquire, engine, where, node, True)
        await loop.run_in_executor(None, schema.upgrade, engine)
        await loop.run_in_executor(None, schema.check, engine)
        standby = Broker(cfg)  # never started: it only logs clients in and answers their open
        server = Server(standby, loop)
        redirector = Redirector()
        server.gate = redirector
        main = cfg.main_listener()
        if main.tls:
            from .protocol.tls import server_context
            server.tls_context = server_context(cfg.tls)
        host, port = await server.start(main.host, main.port, main)
        http = await start_http(standby, cfg, http_port, handler=backup_http)
        announce = cfg.ha.announce or f"{main.scheme}://{shown_host(main.host, host)}:{port}"
        lease = Lease(engine, where, node, cfg.ha.lease_s, announce)
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)

        def backup_lines(line: str) -> None:
            say(line)
            say(f"hermod backup listener on {main.scheme}://{shown_host(main.host, host)}:{port}")
            if http is not None:
                say(f"hermod http on {http[1]}")  # /health answers 503 until this one is live

        taking = asyncio.ensure_future(wait_as_backup(lease, announce, redirector, backup_lines))
        stop_wait = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({taking, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            stop_wait.cancel()
        if not taking.done():
            taking.cancel()
            await asyncio.gather(taking, return_exceptions=True)
            lease.close()
            await server.stop()
            if http is not None:
                await http[0].stop()
            return None
        taken_at = taking.result()
        keeper = LeaseKeeper(lease, taken_at)
        log.info("%s took the store lease (was %s)", node,
                 redirector.live.node if redirector.live else "free")
        await server.stop()
        bound_http = -1  # none
        if http is not None:
            await http[0].stop()
            bound_http = urlsplit(http[1]).port
        return replace(cfg, server=replace(cfg.server, port=port)), bound_http, keeper
    finally:
        if lock is not None:
            lock.release()
        engine.dispose()
