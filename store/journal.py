"""The write-behind journal: `core.ports.Journal` on SQLAlchemy, and the in-memory stand-in.

Theory of operation (SqlJournal). `submit()` appends the unit to a pending list under a lock and
returns; it never touches the database. In the broker (`defer` given) the units of one reactor
turn are kept and appended together at its end, in order; a page read or `close` appends them
first. One writer thread takes everything pending at once and
commits the leading run of units in ONE transaction (group commit: while a commit is being made
durable, the next batch accumulates), then hands the completions to the reactor through `post`
as a single callback that calls each unit's `done(None)` in submission order. Page reads go
through the same queue, so a read sees exactly the units submitted before it.

Faults. A unit's own fault (an AddReference to a queue that is not in the store, a constraint
violated) fails that unit only: the batch is replayed one unit per transaction and the faulty
unit gets `done(error)`. A database that cannot be reached (PostgreSQL stopped, SQLite locked)
fails nothing at first: the writer retries the same batch with exponential backoff, logging one
warning per outage, while producers keep waiting and new units queue up behind in order. A unit
that has waited `fail_after_s` since it was submitted gets `done(StoreUnavailable)` (nothing of
it was applied) so the broker can reject it clearly; later units keep waiting, and everything
resumes when the database is back. Page reads wait for an unreachable database for as long as
the journal is open, and get an empty page once it is closing; a read the database refuses
gets the error instead of a page (the queue tries again later).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Sequence

from sqlalchemy import Connection, Engine

from hermod.broker.core.ports import Operation, Recovered, StoredReference

from . import recovery
from .apply import Applier
from .engine import display_url
from .journal_units import PARTS_MAX_OPS, Done, PageDone, Parts, Read, Unit, split
from .outages import Unreachable, cause, unreachable
from .errors import StoreClosed, StoreError, StoreUnavailable, one_line
from .lease import LeaseLost
from .lock import StoreLock
from .stats import JournalStats, StatsCounter

log = logging.getLogger(__name__)

# `loop.call_soon_threadsafe` or anything with its shape: post(callback, *args).
Post = Callable[..., object]


class SqlJournal:
    """Durable journal on SQLite or PostgreSQL (see the module docstring)."""

    durable = True

    def __init__(self, engine: Engine, post: Post | None = None, *,
                 fail_after_s: float = 30.0, retry_initial_s: float = 0.05,
                 retry_max_s: float = 2.0, max_batch_ops: int = 20_000,
                 lock: StoreLock | None = None,
                 fence: Callable[[Connection], None] | None = None,
                 ownership: Callable[[Connection, list[Operation]], None] | None = None,
                 defer: Callable[[Callable[[], None]], object] | None = None) -> None:
        """`post(fn, *args)` runs fn on the reactor thread from the writer (completions);
        `defer(fn)`, the reactor's `call_soon`: when given, `submit` (then always called on the
        reactor thread) hands the units of a turn to the writer together at its end."""
        self._engine = engine
        self._lock = lock  # released by close()
        # Called last in every commit transaction (store.lease.Lease.check): raises LeaseLost
        # when this broker is no longer the live one, and nothing of the batch is committed.
        self._fence = fence
        # [ha] mode = "cluster" (store.ownership.Membership.fence): called last with the batch's
        # operations; raises OwnershipLost when a queue they touch is no longer this node's.
        self._ownership = ownership
        self._post = post
        self.fail_after_s = fail_after_s
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._max_batch_ops = max_batch_ops
        self._where = display_url(engine.url)
        self._sqlite = engine.dialect.name == "sqlite"
        self._applier = Applier(engine.dialect.name)
        self._stats = StatsCounter()
        self._lock_pending = threading.Lock()
        self._cond = threading.Condition(self._lock_pending)
        self._pending: list[Unit | Read] = []
        self._defer = defer
        self._turn: list[Unit] = []  # reactor thread only
        self._turn_scheduled = False
        self._turn_at = 0.0
        # The writer waits for work: `submit` (the reactor's hot path) notifies only then.
        self._writer_waiting = False
        self._closing = False
        self._closed = False
        self._connection: Connection | None = None
        self._outage_since: float | None = None  # first failed attempt of this outage
        self._outage_logged = False
        # Writer thread: the work at the head may be partly stored already (`_commit`).
        self._replaying = False
        self._thread = threading.Thread(target=self._run, name="hermod-store-writer",
                                        daemon=True)
        self._thread.start()

    # -- the port ------------------------------------------------------------------------------

    def recover(self, *, window: int | None = None, max_bytes: int | None = None,
                queues: frozenset[str] | None = None) -> Recovered:
        """Everything stored, in order (blocks; called once before serving). `window` and
        `max_bytes`, extensions of the port: at most that many references per queue, and
        about that many bytes of messages in all; the rest is paged in later. `queues`: only
        these queues' references (a cluster node's own queues); every definition still."""
        return recovery.recover(self._engine, window=window, max_bytes=max_bytes, only=queues)

    def submit(self, ops: Sequence[Operation], done: Done | None) -> None:
        if self._defer is not None:
            # Kept for the end of this reactor turn (`_hand_over`): one lock and at most one
            # wake-up of the writer per turn, not per unit, and fewer GIL hand-offs to it. Q1D on
            # SQLite FULL, broker CPU per 100k messages 3.4 -> 2.9 s (medians of 3, interleaved
            # with the build before, load 1.5-2.9).
            if self._closing:
                raise StoreClosed("the store is closed")
            if not self._turn_scheduled:
                self._turn_scheduled = True
                self._turn_at = time.monotonic()  # when its units were submitted, near enough
                self._defer(self._end_turn)
            self._turn.append(Unit(ops, done, self._turn_at))
            return
        self._enqueue(Unit(ops, done, time.monotonic()))

    def open_unit(self, ops: list[Operation], done: Callable[[object], None]) -> Unit:
        """Extension of the port: `submit` a unit that more parts may join (`add_part`) while
        it is the last unit submitted in this reactor turn, so that one producer link's durable
        messages of a turn are stored, completed and settled together (one `Unit`, one
        completion). `done(outcome)`: None when every part is stored, an error when none is
        (the unit failed as a whole: an outage past `fail_after_s`, a lost lease), or a list of
        one outcome per part after a part's own fault: the unit is then replayed one
        transaction per part (`_split`), as a batch is one per unit, so that a fault fails its
        own part alone. `ops` is the unit's own list: parts are appended to it."""
        parts = Parts(len(ops), done)
        unit = Unit(ops, parts.finish, 0.0, parts)
        defer = self._defer
        if defer is None:
            unit.submitted = time.monotonic()
            self._enqueue(unit)
            return unit
        self._keep_for_turn(unit, defer)
        return unit

    def add_part(self, unit: Unit, ops: Sequence[Operation]) -> bool:
        """One more part of `unit` (`open_unit`), if it is still the last unit of this turn and
        not too big; False otherwise (nothing is done: the caller opens a new unit)."""
        turn = self._turn
        if not turn or turn[-1] is not unit:
            return False
        have = unit.ops
        if len(have) + len(ops) > PARTS_MAX_OPS:
            return False
        have.extend(ops)  # type: ignore[attr-defined]  # open_unit's own list
        unit.parts.ends.append(len(have))  # type: ignore[union-attr]
        return True

    def _keep_for_turn(self, unit: Unit, defer: Callable[[Callable[[], None]], object]) -> None:
        """`submit` in the broker: kept for the end of this reactor turn (`_hand_over`)."""
        if self._closing:
            raise StoreClosed("the store is closed")
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self._turn_at = time.monotonic()  # when its units were submitted, near enough
            defer(self._end_turn)
        unit.submitted = self._turn_at
        self._turn.append(unit)

    def _enqueue(self, unit: Unit) -> None:
        with self._lock_pending:
            if self._closing:
                raise StoreClosed("the store is closed")
            self._pending.append(unit)
            if self._writer_waiting:
                self._writer_waiting = False
                self._cond.notify()

    def _end_turn(self) -> None:
        self._turn_scheduled = False
        self._hand_over()

    def _hand_over(self) -> None:
        """The units submitted this turn, in order, to the writer (on the reactor thread)."""
        turn = self._turn
        if not turn:
            return
        self._turn = []
        with self._lock_pending:
            self._pending.extend(turn)
            if self._writer_waiting:
                self._writer_waiting = False
                self._cond.notify()

    def read_page(self, queue: str, after_message_id: int, limit: int, done: PageDone) -> None:
        self._hand_over()  # a read sees every unit submitted before it
        with self._cond:
            if self._closing:
                raise StoreClosed("the store is closed")
            self._pending.append(Read(queue, after_message_id, limit, done))
            self._cond.notify()

    def close(self) -> None:
        """Commit (or, with the database away, expire) everything submitted, deliver every
        completion, stop the writer, release the database. Idempotent."""
        if not self._closed:
            self._hand_over()  # the units of this turn are submitted: they are written too
        with self._cond:
            if self._closed:
                return
            self._closing = True
            self._cond.notify()
        self._thread.join()
        if self._lock is not None:
            self._lock.release()  # first: on PostgreSQL it unlocks on the writer's session
        self._drop_connection()
        self._engine.dispose()
        self._closed = True

    # -- extensions ----------------------------------------------------------------------------

    def stats(self) -> JournalStats:
        return self._stats.snapshot()

    @property
    def engine(self) -> Engine:
        return self._engine

    # -- the writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        work: deque[Unit | Read] = deque()
        delay = self._retry_initial_s
        while True:
            with self._cond:
                while not self._pending and not work and not self._closing:
                    self._writer_waiting = True
                    self._cond.wait()
                self._writer_waiting = False
                work.extend(self._pending)
                self._pending.clear()
                closing = self._closing
            if not work:
                if closing:
                    return
                continue
            try:
                if isinstance(work[0], Read):
                    self._read(work[0])
                    work.popleft()
                else:
                    self._write(work)
            except Unreachable as error:
                if self._read_given_up(work, closing):
                    continue
                self._outage(error, work, closing)
                time.sleep(self._backoff(delay, work))
                delay = min(delay * 2, self._retry_max_s)
                continue
            except Exception:  # a bug: never let the writer die with producers waiting
                log.exception("store writer: unexpected error")
                self._fail_head(work)
            delay = self._retry_initial_s

    def _write(self, work: deque[Unit | Read]) -> None:
        batch: list[Unit] = []
        ops = 0
        for item in work:
            if not isinstance(item, Unit) or (batch and ops + len(item.ops) > self._max_batch_ops):
                break
            batch.append(item)
            ops += len(item.ops)
        self._write_batch(work, batch, ops)
        # The work that met a failure is done (an outage propagates above, keeping the replay
        # on for the same work when the store is back): plain inserts again (`_commit`).
        self._replaying = False

    def _write_batch(self, work: deque[Unit | Read], batch: list[Unit], ops: int) -> None:
        try:
            self._commit(batch, ops)
        except Unreachable:
            raise
        except LeaseLost as error:  # every unit would fail the same way: no replay
            self._complete(work, len(batch), error)
            return
        except Exception as error:
            if len(batch) == 1:
                self._complete(work, 1, error)
                return
            # Find the faulty units: one transaction per unit, in order.
            log.debug("store batch of %d units failed (%s); applying one by one",
                      len(batch), one_line(error))
            for unit in batch:
                try:
                    self._commit([unit], len(unit.ops))
                except Unreachable:
                    raise
                except Exception as unit_error:
                    self._complete(work, 1, unit_error)
                else:
                    self._complete(work, 1, None)
            return
        self._complete(work, len(batch), None)

    def _commit(self, batch: list[Unit], ops: int) -> None:
        """Commit `batch` in one transaction, with plain inserts first. They refuse a row that
        is already stored, which only a replay should meet (the outcome of a commit lost with
        the connection; a message stored by an earlier unit and added again): after any
        failure, and until the work that met it is done, the idempotent inserts
        (`ON CONFLICT DO NOTHING`) are used. PostgreSQL's server pays for those on every row
        (speculative insertion): 13.2 -> 10.2 µs of server CPU per message, the bulk
        statements alone, 300-message batches."""
        if not self._replaying:
            try:
                self._transaction(batch, ops, idempotent=False)
                return
            except (Unreachable, LeaseLost):
                self._replaying = True
                raise
            except Exception as error:
                log.debug("store batch of %d units failed with plain inserts (%s); once more "
                          "with idempotent ones", len(batch), one_line(error))
            self._replaying = True
        self._stats.add("idempotent_commits")
        self._transaction(batch, ops, idempotent=True)

    def _transaction(self, batch: list[Unit], ops: int, idempotent: bool) -> None:
        started = time.perf_counter()
        try:
            connection = self._connect()
            with connection.begin():
                # Nothing runs after the ops without a fence: they may commit themselves.
                self._applier.apply(connection, (unit.ops for unit in batch), idempotent,
                                    commit=self._fence is None and self._ownership is None)
                if self._fence is not None:
                    self._fence(connection)
                if self._ownership is not None:
                    self._ownership(connection, [op for unit in batch for op in unit.ops])
        except Exception as error:
            self._applier.rolled_back()
            self._raise_if_unreachable(error)
            if isinstance(error, StoreError):
                raise
            raise StoreError(f"store {self._where}: {cause(error)}") from error
        self._applier.committed()
        self._stats.commit(len(batch), ops, time.perf_counter() - started)
        self._reached()

    def _read(self, read: Read) -> None:
        page: list[StoredReference] | StoreError
        try:
            connection = self._connect()
            with connection.begin():
                queue_id = self._applier.queue_id(connection, read.queue)
                page = ([] if queue_id is None or read.limit <= 0 else
                        recovery.read_page(connection, queue_id, read.after, read.limit))
        except Exception as error:
            self._raise_if_unreachable(error)
            log.error("store %s: page read of %s failed: %s", self._where, read.queue,
                      cause(error))
            # Not an empty page, which would read as "nothing more stored" and hide the rest
            # of the queue: the error, and the queue tries again later.
            page = StoreError(f"store {self._where}: page read failed: {cause(error)}")
        else:
            self._reached()
        self._stats.add("pages_read")
        self._deliver([(read.done, page)])

    def problem(self) -> str | None:
        """While an outage is on (a second failed attempt in a row: a lone failure may be an idle
        connection the server dropped, which the retry replaces), why. Read on the loop's thread
        while the writer sets it: a plain attribute, at worst one attempt late."""
        since = self._outage_since
        if since is None or not self._outage_logged:
            return None
        return f"store {self._where} unreachable for {time.monotonic() - since:.0f} s"

    def _reached(self) -> None:
        """The store answered: end an outage, logged before any waiting work completes."""
        if self._outage_since is None:
            return
        if self._outage_logged:
            log.warning("store %s reachable again after %.1f s", self._where,
                        time.monotonic() - self._outage_since)
        self._outage_since = None
        self._outage_logged = False

    def _read_given_up(self, work: deque, closing: bool) -> bool:
        """While closing, a read that cannot be served is answered with an empty page."""
        if closing and work and isinstance(work[0], Read):
            read = work.popleft()
            self._deliver([(read.done, [])])
            return True
        return False

    def _outage(self, error: Unreachable, work: deque[Unit | Read], closing: bool) -> None:
        now = time.monotonic()
        self._stats.add("retries")
        if self._outage_since is None:
            # The first failure may be a connection the server dropped while idle (it was
            # restarted): the retry reconnects, so only warn when that fails too.
            self._outage_since = now
        elif not self._outage_logged:
            self._outage_logged = True
            self._stats.add("outages")
            log.warning("store %s unreachable (%s); retrying, durable work waits "
                        "(rejected after %.0f s)", self._where, error, self.fail_after_s)
        # Units that waited too long fail, oldest first; the rest keep their places. A unit
        # with no completion (a queue deleted, a delivery count) has nobody to tell: failing it
        # would lose it silently, so it waits for the database however long that takes.
        # Only a broker that is stopping gives them up, and says so.
        expired = [item for item in work
                   if isinstance(item, Unit) and (item.done is not None or closing)
                   and now - item.submitted >= self.fail_after_s]
        if not expired:
            return
        silent = sum(1 for unit in expired if unit.done is None)
        if silent:
            log.error("store %s unreachable while stopping: %d unit(s) with no producer to tell "
                      "(queue deletions, delivery counts, acknowledgements) were not written",
                      self._where, silent)
        gone = {id(unit) for unit in expired}
        keep = [item for item in work if id(item) not in gone]
        work.clear()
        work.extend(keep)
        failure = StoreUnavailable(f"store {self._where} unreachable for more than "
                                   f"{self.fail_after_s:g} s: {error}")
        self._stats.add("expired_units", len(expired))
        self._deliver([(unit.done, failure) for unit in expired if unit.done is not None])

    def _backoff(self, delay: float, work: deque[Unit | Read]) -> float:
        """The retry delay, cut short so that the oldest unit is rejected on time."""
        oldest = next((item.submitted for item in work if isinstance(item, Unit)
                       and (item.done is not None or self._closing)), None)
        if oldest is None:
            return delay
        return max(0.001, min(delay, oldest + self.fail_after_s - time.monotonic()))

    def _fail_head(self, work: deque[Unit | Read]) -> None:
        item = work.popleft()
        if isinstance(item, Unit):
            self._stats.add("failed_units")
            if item.done is not None:
                self._deliver([(item.done, StoreError("store writer failed on this unit"))])
        else:
            self._deliver([(item.done, [])])

    def _complete(self, work: deque, count: int, error: BaseException | None) -> None:
        if count == 1 and error is not None and not isinstance(error, LeaseLost):
            head = work[0]
            if head.parts is not None and len(head.parts.ends) > 1:
                # A fault of a unit of parts: which part's? Each is decided in a transaction of
                # its own, as `_write_batch` does for the units of a batch.
                self._split(head)
                error = None  # every part is decided: `Parts.finish` hands over their outcomes
        calls = []
        for _ in range(count):
            unit = work.popleft()
            if unit.done is not None:
                calls.append((unit.done, error))
        if error is not None:
            self._stats.add("failed_units", count)
            log.warning("store unit failed: %s", one_line(error))
        self._deliver(calls)

    def _split(self, unit: Unit) -> None:
        split(unit, self._commit_part, self._part_failed)

    def _commit_part(self, unit: Unit) -> None:
        self._commit([unit], len(unit.ops))

    def _part_failed(self, error: BaseException) -> None:
        log.warning("store unit failed: %s", one_line(error))
        self._stats.add("failed_units")

    def _deliver(self, calls: Sequence[tuple[Callable, object]]) -> None:
        if not calls:
            return
        if self._post is None:
            _call_all(calls)
            return
        try:
            self._post(_call_all, calls)
        except Exception:  # the loop is gone (broker stopping): nobody is waiting any more
            log.debug("store: could not post %d completions", len(calls), exc_info=True)

    # -- connection ----------------------------------------------------------------------------

    def _connect(self) -> Connection:
        if self._connection is None:
            # On PostgreSQL the lock's own session (store.lock): a new one takes the lock first.
            self._connection = (self._lock.connect(self._engine) if self._lock is not None
                                else self._engine.connect())
        return self._connection

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.invalidate()
                connection.close()
            except Exception:
                pass
        self._applier.forget()

    def _raise_if_unreachable(self, error: BaseException) -> None:
        if unreachable(error, self._sqlite):
            self._drop_connection()
            raise Unreachable(error) from error


def _call_all(calls: Sequence[tuple[Callable, object]]) -> None:
    """Runs on the reactor thread: each completion in order; one failing does not stop the rest."""
    for done, argument in calls:
        try:
            done(argument)
        except Exception:
            log.exception("store completion callback failed")
