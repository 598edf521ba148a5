"""Several live brokers on one PostgreSQL: node leases, queue ownership and shared id blocks.

The store-level half of docs/scale-out.md; `broker/cluster.py` runs it in `hermod run`
(`[ha] mode = "cluster"`).

Theory of operation. Each broker process is a `Membership`: a row of `cluster_nodes` (its
`holder`: node name plus a token of this process) alive until `expires_at` on the DATABASE's
clock (`clock_timestamp()`), renewed by one UPDATE per node whatever the number of queues it
owns. Once expired a holder can never renew again (the UPDATE requires it unexpired), so "dead"
is final for a process; a restarted broker is a new holder.

A queue is owned by the holder named in its `queue_owners` row while that holder is alive.

- claim: lock the queue's row `FOR UPDATE`; take it when it has no holder, is ours already, or
  its holder is dead; the epoch grows at every change of owner (a fencing token).
- check (the fence): last statement of every commit transaction of the owner: our node row must
  be unexpired and every queue the commit touches must still name us; the queue rows stay locked
  `FOR KEY SHARE` until the commit. That lock blocks a claimant's `FOR UPDATE`: a takeover waits
  for a commit in flight, and every later commit of the old owner finds another holder and fails
  with `OwnershipLost` (nothing of it committed). So whoever claims a queue recovers everything
  its former owner ever committed for it, and the former owner commits nothing more to it.
- A journal session paused inside a transaction (SIGSTOP) would hold that lock: `guard()` has the
  server end such sessions after `lease_s`.

Every change of a queue's owner made here (claim, release, a queue created or deleted in a
commit, a graceful leave) sends `pg_notify('hermod_owners', queue)` in its transaction (`*` for
a leave), so other members re-read the owners when it commits (`listen`) instead of once per
renew period. A member's death sends nothing: its queues change owner when claimed, which
notifies.

`allocate_ids` hands out disjoint blocks of message ids from one counter row, never below the
highest id already in the store, so several writers never assign the same id.
"""
from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from sqlalchemy import Connection, Engine, select, text, update

from hermod.broker.core.ports import DeleteQueue, PutQueue

from .errors import StoreError, StoreUnreachable, one_line
from .lease import end_idle_transactions
from .models import id_blocks
from .recovery import highest_message_id

_TIMEOUT_MS = 2000  # statement and lock timeout of membership transactions
CHANNEL = "hermod_owners"  # pg_notify channel of owner changes; the payload is a queue name
EVERY_QUEUE = "*"  # the payload of a change to all of a member's queues (it left)

T = TypeVar("T")

log = logging.getLogger("hermod.cluster")


class OwnershipLost(StoreError):
    """This broker no longer owns a queue it was about to commit to (or is no longer alive)."""


class NodeNameTaken(StoreError):
    """Another live broker process uses this node name."""


@dataclass(frozen=True)
class Owner:
    node: str
    announce: str | None
    epoch: int


class Membership:
    """One broker process in a several-live-brokers store. Blocking calls (run them off the
    reactor thread); every database failure raises StoreUnreachable (one line). PostgreSQL only."""

    def __init__(self, engine: Engine, where: str, node: str, lease_s: float,
                 announce: str | None = None) -> None:
        self._engine = engine
        self._where = where
        self.node = node
        self.lease_s = float(lease_s)
        self.announce = announce
        self.holder = f"{node} {uuid.uuid4().hex[:12]}"

    def _run(self, statements: Callable[[Connection], T]) -> T:
        """`statements(connection)` in one bounded transaction."""
        try:
            with self._engine.begin() as connection:
                connection.exec_driver_sql(f"SET LOCAL statement_timeout = {_TIMEOUT_MS}")
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {_TIMEOUT_MS}")
                return statements(connection)
        except StoreError:
            raise
        except Exception as error:
            raise StoreUnreachable(f"store {self._where}: membership: {one_line(error)}") from error

    def _params(self, **more: object) -> dict[str, object]:
        return {"holder": self.holder, "node": self.node, "announce": self.announce,
                "lease_s": self.lease_s, **more}

    # -- the node lease ------------------------------------------------------------------------

    def join(self) -> None:
        """Become a live member. Refused (NodeNameTaken, naming it) while another live process
        uses the same node name; a dead one's row is cleared."""
        def join(connection: Connection) -> None:
            # Serialises joins of one node name (a row lock would not cover "no row yet").
            connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('hermod node ' || :node))"),
                               self._params())
            other = connection.execute(text(
                "SELECT holder FROM cluster_nodes WHERE node = :node AND holder <> :holder"
                " AND expires_at > clock_timestamp()"), self._params()).scalar()
            if other is not None:
                raise NodeNameTaken(f"store {self._where}: node name {self.node!r} is in use by "
                                    f"another live broker ({other})")
            connection.execute(text("DELETE FROM cluster_nodes WHERE node = :node"
                                    " AND holder <> :holder"), self._params())
            connection.execute(text(
                "INSERT INTO cluster_nodes (holder, node, announce, expires_at) VALUES"
                " (:holder, :node, :announce, clock_timestamp() + :lease_s * interval '1 second')"
                " ON CONFLICT (holder) DO NOTHING"), self._params())
        self._run(join)

    def renew(self) -> bool:
        """Push our expiry `lease_s` past the database's now; False once it has expired (the
        process must stop serving: its queues may already have other owners)."""
        return self._run(lambda connection: connection.execute(text(
            "UPDATE cluster_nodes SET expires_at = clock_timestamp() + :lease_s * interval '1 second'"
            " WHERE holder = :holder AND expires_at > clock_timestamp()"),
            self._params()).rowcount == 1)

    def leave(self) -> None:
        """A graceful stop: our queues are free at once, our node row goes."""
        def leave(connection: Connection) -> None:
            connection.execute(text("UPDATE queue_owners SET holder = NULL WHERE holder = :holder"),
                               self._params())
            connection.execute(text("DELETE FROM cluster_nodes WHERE holder = :holder"),
                               self._params())
            _notify(connection, EVERY_QUEUE)
        self._run(leave)

    def live_nodes(self) -> dict[str, str | None]:
        """node -> announce of every live member."""
        rows = self._run(lambda connection: connection.execute(text(
            "SELECT node, announce FROM cluster_nodes WHERE expires_at > clock_timestamp()"
            " ORDER BY node")).all())
        return {row.node: row.announce for row in rows}

    # -- queue ownership -----------------------------------------------------------------------

    def claim(self, queue: str) -> int | None:
        """Own `queue`; its new epoch, or None while another live member owns it. Raises
        OwnershipLost when we are no longer alive ourselves."""
        def claim(connection: Connection) -> int | None:
            self._require_alive(connection)
            connection.execute(text("INSERT INTO queue_owners (queue, holder, epoch)"
                                    " VALUES (:queue, NULL, 0) ON CONFLICT DO NOTHING"),
                               self._params(queue=queue))
            row = connection.execute(text(
                "SELECT o.holder, o.epoch FROM queue_owners o WHERE o.queue = :queue FOR UPDATE"),
                self._params(queue=queue)).one()
            if row.holder == self.holder:
                return int(row.epoch)
            if row.holder is not None and self._alive(connection, row.holder):
                return None
            epoch = connection.execute(text(
                "UPDATE queue_owners SET holder = :holder, epoch = epoch + 1 WHERE queue = :queue"
                " RETURNING epoch"), self._params(queue=queue)).scalar_one()
            _notify(connection, queue)
            return epoch
        return self._run(claim)

    def release(self, queue: str) -> bool:
        """Give `queue` up (rebalancing); False if it was not ours."""
        def release(connection: Connection) -> bool:
            released = connection.execute(text(
                "UPDATE queue_owners SET holder = NULL WHERE queue = :queue AND holder = :holder"),
                self._params(queue=queue)).rowcount == 1
            if released:
                _notify(connection, queue)
            return released
        return self._run(release)

    def owner(self, queue: str) -> Owner | None:
        """The live owner of `queue` (where to redirect or forward), or None."""
        row = self._run(lambda connection: connection.execute(text(
            "SELECT n.node, n.announce, o.epoch FROM queue_owners o"
            " JOIN cluster_nodes n ON n.holder = o.holder"
            " WHERE o.queue = :queue AND n.expires_at > clock_timestamp()"),
            self._params(queue=queue)).first())
        return None if row is None else Owner(row.node, row.announce, int(row.epoch))

    def owned(self) -> list[str]:
        return self._run(lambda connection: list(connection.execute(text(
            "SELECT queue FROM queue_owners WHERE holder = :holder ORDER BY queue"),
            self._params()).scalars()))

    def claimable(self) -> list[str]:
        """Durable queues (rows of `queues`) with no live owner: never claimed, released, or
        owned by a dead member. What `hermod run` claims from at start and at every round."""
        return self._run(self._claimable)

    @staticmethod
    def _claimable(connection: Connection) -> list[str]:
        return list(connection.execute(text(
            "SELECT q.name FROM queues q LEFT JOIN queue_owners o ON o.queue = q.name"
            " LEFT JOIN cluster_nodes n ON n.holder = o.holder"
            " AND n.expires_at > clock_timestamp()"
            " WHERE n.holder IS NULL ORDER BY q.name")).scalars())

    def census(self) -> tuple[int, int, int, list[str]]:
        """(durable queues, live members, queues we own, claimable queues) in one transaction:
        what a claim round spreads by."""
        def census(connection: Connection) -> tuple[int, int, int, list[str]]:
            total = connection.execute(text("SELECT count(*) FROM queues")).scalar_one()
            live = connection.execute(text("SELECT count(*) FROM cluster_nodes"
                                           " WHERE expires_at > clock_timestamp()")).scalar_one()
            mine = connection.execute(text("SELECT count(*) FROM queue_owners o JOIN queues q"
                                           " ON q.name = o.queue WHERE o.holder = :holder"),
                                      self._params()).scalar_one()
            return int(total), int(live), int(mine), self._claimable(connection)
        return self._run(census)

    def owners_view(self) -> tuple[frozenset[str], dict[str, tuple[str, str | None]]]:
        """(queues we own, queue -> (node, announce) of every queue another live member owns)
        in one query: the routing cache of `hermod run`."""
        rows = self._run(lambda connection: connection.execute(text(
            "SELECT o.queue, o.holder, n.node, n.announce FROM queue_owners o"
            " JOIN cluster_nodes n ON n.holder = o.holder"
            " WHERE n.expires_at > clock_timestamp()")).all())
        mine = frozenset(row.queue for row in rows if row.holder == self.holder)
        return mine, {row.queue: (row.node, row.announce) for row in rows
                      if row.holder != self.holder}

    def listen(self, stop: threading.Event, changed: Callable[[set[str]], None],
               period: float) -> None:
        """Blocking, on a thread of its own until `stop`: LISTEN on a dedicated connection and
        call `changed(queue names)` for each batch of owner-change notifications (EVERY_QUEUE
        after every (re)connection: what changed while nobody listened is unknown). A lost
        connection is logged once and made again every `period`."""
        failing = False
        while not stop.is_set():
            raw = None
            try:
                raw = self._engine.raw_connection()
                driver = raw.driver_connection
                assert driver is not None, "a fresh raw connection has its driver's connection"
                raw.detach()  # never back to the pool: it stays in LISTEN
                driver.autocommit = True
                driver.execute(f"LISTEN {CHANNEL}")
                failing = False
                changed({EVERY_QUEUE})
                while not stop.is_set():
                    names = {n.payload for n in driver.notifies(timeout=period, stop_after=1)}
                    if names:  # and whatever else has arrived meanwhile: one re-read for all
                        names |= {n.payload for n in driver.notifies(timeout=0.001)}
                        changed(names)
            except Exception as error:  # noqa: BLE001 - logged; the rounds still refresh
                if not failing:
                    log.warning("store %s: listening for owner changes failed: %s", self._where,
                                one_line(error))
                failing = True
                stop.wait(period)
            finally:
                if raw is not None:
                    try:
                        raw.close()
                    except Exception as error:  # noqa: BLE001 - a broken one may not close cleanly
                        log.debug("closing the owner-change listener: %s", one_line(error))

    def set_announce(self, announce: str) -> None:
        """Where clients reach this node, once its listener is bound (port 0 at start)."""
        self.announce = announce
        self._run(lambda connection: connection.execute(text(
            "UPDATE cluster_nodes SET announce = :announce WHERE holder = :holder"),
            self._params()))

    def orphans(self) -> list[str]:
        """Queues with no live owner: released, or owned by a dead member."""
        return self._run(lambda connection: list(connection.execute(text(
            "SELECT o.queue FROM queue_owners o LEFT JOIN cluster_nodes n"
            " ON n.holder = o.holder AND n.expires_at > clock_timestamp()"
            " WHERE n.holder IS NULL ORDER BY o.queue")).scalars()))

    def allocate(self, size: int) -> range:
        """A block of message ids of our own (`allocate_ids` in a transaction of its own)."""
        return self._run(lambda connection: allocate_ids(connection, size))

    # -- the fence -----------------------------------------------------------------------------

    def check(self, connection: Connection, queues: Iterable[str]) -> None:
        """Inside a commit transaction: raise OwnershipLost unless we are alive and own every
        queue in `queues`; their rows stay locked against a claim until the commit."""
        wanted = sorted(set(queues))  # one lock order for every committer
        if not wanted:
            self._require_alive(connection)
            return
        # One round trip on the happy path: our node row and the queue rows, all locked.
        held = set(connection.execute(text(
            "SELECT o.queue FROM queue_owners o JOIN cluster_nodes n ON n.holder = o.holder"
            " WHERE o.queue = ANY(:queues) AND o.holder = :holder"
            " AND n.expires_at > clock_timestamp() ORDER BY o.queue FOR KEY SHARE"),
            self._params(queues=wanted)).scalars())
        if len(held) == len(wanted):
            return
        self._require_alive(connection)  # names the better reason first
        lost = [queue for queue in wanted if queue not in held]
        raise OwnershipLost(f"store {self._where}: this broker ({self.node}) no longer owns "
                            f"{', '.join(lost)}; nothing was committed")

    def fence(self, connection: Connection, ops: Iterable[object]) -> None:
        """The journal's hook, last in every commit transaction: queues the batch creates
        become ours (unless another live member owns them), then `check` every queue it touches;
        deleted queues lose their ownership row with them."""
        touched, created, deleted = queues_of(ops)
        for queue in sorted(created):
            connection.execute(text(
                "INSERT INTO queue_owners (queue, holder, epoch) VALUES (:queue, :holder, 1)"
                " ON CONFLICT (queue) DO UPDATE SET holder = :holder,"
                " epoch = queue_owners.epoch + 1 WHERE queue_owners.holder IS NULL"
                " OR NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.holder ="
                " queue_owners.holder AND n.expires_at > clock_timestamp())"),
                self._params(queue=queue))
        self.check(connection, touched | created)
        if deleted:
            connection.execute(text("DELETE FROM queue_owners WHERE queue = ANY(:queues)"
                                    " AND holder = :holder"),
                               self._params(queues=sorted(deleted)))
        for queue in sorted(created | deleted):  # rare: not per message
            _notify(connection, queue)

    def guard(self, engine: Engine) -> None:
        """Sessions of `engine` (the journal's) idle inside a transaction for `lease_s` are ended
        by the server, so a paused owner cannot hold a takeover back."""
        end_idle_transactions(engine, self.lease_s)

    def _require_alive(self, connection: Connection) -> None:
        alive = connection.execute(text(
            "SELECT 1 FROM cluster_nodes WHERE holder = :holder AND expires_at > clock_timestamp()"
            " FOR KEY SHARE"), self._params()).first()
        if alive is None:
            raise OwnershipLost(f"store {self._where}: this broker ({self.node}) is no longer a "
                                "live member (its node lease expired); nothing was committed")

    @staticmethod
    def _alive(connection: Connection, holder: str) -> bool:
        return connection.execute(text(
            "SELECT 1 FROM cluster_nodes WHERE holder = :holder AND expires_at > clock_timestamp()"),
            {"holder": holder}).first() is not None


def _notify(connection: Connection, queue: str) -> None:
    """Tell the other members (at commit) that `queue` changed owner."""
    connection.execute(text("SELECT pg_notify(:channel, :queue)"),
                       {"channel": CHANNEL, "queue": queue})


def queues_of(ops: Iterable[object]) -> tuple[set[str], set[str], set[str]]:
    """(touched, created, deleted) queue names of a batch of journal operations, in one pass.
    Operations naming no queue (messages, addresses, duplicate ids) are fenced by the node
    check alone: they only matter through the references that point at them."""
    touched: set[str] = set()
    created: set[str] = set()
    deleted: set[str] = set()
    for op in ops:
        if isinstance(op, PutQueue):
            created.add(op.queue.name)
        elif isinstance(op, DeleteQueue):
            deleted.add(op.name)
            touched.add(op.name)
        else:
            queue = getattr(op, "queue", None)
            if isinstance(queue, str):
                touched.add(queue)
    return touched, created, deleted


MESSAGE_IDS = "message"


def allocate_ids(connection: Connection, size: int, name: str = MESSAGE_IDS) -> range:
    """A block of `size` ids no other caller ever gets, above every message id in the store.
    Call inside a transaction; commits with it (a rolled-back block is simply not handed out).
    Both dialects: the counter row is locked (PostgreSQL) or the write serialises (SQLite)."""
    if size < 1:
        raise ValueError("an id block holds at least one id")
    floor = highest_message_id(connection) + 1
    current = connection.execute(
        select(id_blocks.c.next_value).where(id_blocks.c.name == name).with_for_update()).scalar()
    if current is None:  # revision 0004 inserts it
        raise StoreError(f"store: the id counter {name!r} is missing from id_blocks")
    start = max(current, floor)
    connection.execute(update(id_blocks).where(id_blocks.c.name == name)
                       .values(next_value=start + size))
    return range(start, start + size)
