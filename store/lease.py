"""The shared-store lease: which broker of a PostgreSQL store is live ([ha] mode = "shared-store").

Theory of operation. One row of `ha_lease` names the live broker (`holder`: its node and a token
of this process, so a restarted broker is a new holder) and until when it is live, on the
DATABASE's clock (`clock_timestamp()`): no two hosts' clocks are ever compared.

- take: a backup locks the row (`FOR UPDATE`), and takes it when it is free or expired.
- renew: the live moves its expiry `lease_s` past the database's now, only while it still holds
  an unexpired lease. The broker (broker.ha) stops serving at its own monotonic
  `sent + lease_s - margin` after the last renewal it SENT: that is before the expiry the
  database computed, whatever the network delay, so it is never live past its lease.
- fence: every commit of the live's journal ends with `check()`, in the same transaction: the
  row must still name this holder, unexpired, and is locked `FOR KEY SHARE` until the commit.
  `FOR KEY SHARE` does not block the live's own renewals (non-key updates), but it does block a
  takeover's `FOR UPDATE`: a backup that takes the lease waits for any commit in flight, and every
  later commit of the old live fails the check. So what the backup recovers is everything the
  old live ever committed, and the old live commits nothing afterwards, even if it was only
  paused (SIGSTOP) and wakes up believing it is live. A live paused inside a commit transaction
  would hold that lock: its journal sessions have `idle_in_transaction_session_timeout`, so the
  server ends them and the takeover goes on.

Backups also keep a row in `ha_backups` (their announce, refreshed like the lease) so the live
can name them to clients in `failover-server-list`.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, event, text

from .errors import StoreError, StoreUnreachable, one_line

log = logging.getLogger(__name__)

_ROW = 1
_STATEMENT_TIMEOUT_MS = 2000


class LeaseLost(StoreError):
    """This broker no longer holds the store lease: it must not commit or serve."""


@dataclass(frozen=True)
class LiveNode:
    node: str
    announce: str | None


class Lease:
    """The lease seen from one broker process. Blocking calls: run them off the reactor thread.
    Every database failure raises StoreUnreachable (one line)."""

    def __init__(self, engine: Engine, where: str, node: str, lease_s: float,
                 announce: str | None = None) -> None:
        self._engine = engine
        self._where = where
        self.node = node
        self.lease_s = float(lease_s)
        self.announce = announce
        self.holder = f"{node} {uuid.uuid4().hex[:12]}"
        self._connection = None

    # -- connection ----------------------------------------------------------------------------

    def _connect(self):
        if self._connection is not None:
            return self._connection
        dialect = self._engine.dialect
        args, kwargs = dialect.create_connect_args(self._engine.url)
        # The lock_timeout bounds a takeover that waits for a commit in flight (see above).
        options = (f"-c statement_timeout={_STATEMENT_TIMEOUT_MS}"
                   f" -c lock_timeout={_STATEMENT_TIMEOUT_MS}")
        kwargs = {**kwargs, "application_name": f"hermod {self.node} lease", "connect_timeout": 2,
                  "options": options}
        try:
            self._connection = dialect.loaded_dbapi.connect(*args, **kwargs)
        except Exception as error:
            raise StoreUnreachable(f"store {self._where} is unreachable: {one_line(error)}") from error
        return self._connection

    def _run(self, statements):
        """Run `statements(cursor)` in one transaction; any failure drops the connection."""
        connection = self._connect()
        try:
            with connection.transaction():
                with connection.cursor() as cursor:
                    return statements(cursor)
        except Exception as error:
            self.close()
            raise StoreUnreachable(f"store {self._where}: lease: {one_line(error)}") from error

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # already broken
                pass

    # -- backup side ---------------------------------------------------------------------------

    def try_take(self) -> bool:
        """Take the lease if it is free or expired (or already ours)."""
        def take(cursor):
            cursor.execute("INSERT INTO ha_lease (id, epoch, expires_at) VALUES (%s, 0, '-infinity')"
                           " ON CONFLICT DO NOTHING", (_ROW,))
            cursor.execute("SELECT holder = %s OR expires_at <= clock_timestamp() FROM ha_lease"
                           " WHERE id = %s FOR UPDATE", (self.holder, _ROW))
            if not cursor.fetchone()[0]:
                return False
            cursor.execute("UPDATE ha_lease SET holder = %s, node = %s, announce = %s,"
                           " epoch = epoch + 1,"
                           " expires_at = clock_timestamp() + %s * interval '1 second'"
                           " WHERE id = %s", (self.holder, self.node, self.announce, self.lease_s, _ROW))
            cursor.execute("DELETE FROM ha_backups WHERE node = %s", (self.node,))
            return True
        return self._run(take)

    def live(self) -> LiveNode | None:
        """The live node while its lease runs."""
        def read(cursor):
            cursor.execute("SELECT node, announce FROM ha_lease WHERE id = %s"
                           " AND expires_at > clock_timestamp()", (_ROW,))
            return cursor.fetchone()
        row = self._run(read)
        return None if row is None or row[0] is None else LiveNode(row[0], row[1])

    def register_backup(self, announce: str) -> None:
        def upsert(cursor):
            cursor.execute("INSERT INTO ha_backups (node, announce, seen_at)"
                           " VALUES (%s, %s, clock_timestamp())"
                           " ON CONFLICT (node) DO UPDATE SET announce = excluded.announce,"
                           " seen_at = excluded.seen_at", (self.node, announce))
        self._run(upsert)

    # -- live side -----------------------------------------------------------------------------

    def renew(self) -> bool:
        """Push the expiry `lease_s` past the database's now; False if the lease is no longer
        ours (expired or taken)."""
        def renew(cursor):
            cursor.execute("UPDATE ha_lease SET expires_at = clock_timestamp() + %s * interval '1 second',"
                           " announce = %s WHERE id = %s AND holder = %s"
                           " AND expires_at > clock_timestamp()",
                           (self.lease_s, self.announce, _ROW, self.holder))
            return cursor.rowcount == 1
        return self._run(renew)

    def backups(self) -> list[str]:
        """The announces of backups seen within the lease time."""
        def read(cursor):
            cursor.execute("SELECT announce FROM ha_backups WHERE node <> %s"
                           " AND seen_at > clock_timestamp() - %s * interval '1 second'"
                           " ORDER BY node", (self.node, self.lease_s))
            return [row[0] for row in cursor.fetchall()]
        return self._run(read)

    def resign(self) -> None:
        """A graceful stop: the lease ends now, so a backup need not wait for it to expire.
        Best effort: if the database is away, the lease simply expires."""
        def end(cursor):
            cursor.execute("UPDATE ha_lease SET expires_at = clock_timestamp() WHERE id = %s"
                           " AND holder = %s", (_ROW, self.holder))
            cursor.execute("DELETE FROM ha_backups WHERE node = %s", (self.node,))
        try:
            self._run(end)
        except StoreError as error:
            log.warning("could not give up the store lease (%s); it expires by itself", error)
        self.close()

    # -- the journal's fence ---------------------------------------------------------------------

    def check(self, connection: Connection) -> None:
        """Inside a commit transaction of the journal: raise LeaseLost unless this broker still
        holds an unexpired lease; the row stays locked against a takeover until the commit."""
        held = connection.execute(
            text("SELECT 1 FROM ha_lease WHERE id = :row AND holder = :holder"
                 " AND expires_at > clock_timestamp() FOR KEY SHARE"),
            {"row": _ROW, "holder": self.holder}).first()
        if held is None:
            raise LeaseLost(f"store {self._where}: this broker ({self.node}) no longer holds "
                            "the store lease; nothing was committed")

    def guard(self, engine: Engine) -> None:
        """A journal session paused inside a transaction must not hold a takeover back for
        longer than a lease: the server ends it after `lease_s`."""
        end_idle_transactions(engine, self.lease_s)


def end_idle_transactions(engine: Engine, after_s: float) -> None:
    """Every new session of `engine` is ended by the server once it has been idle inside a
    transaction for `after_s` (a paused process must not hold row locks for ever)."""
    timeout_ms = int(after_s * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # pragma: no branch - tiny
        dbapi_connection.execute(f"SET idle_in_transaction_session_timeout = {timeout_ms}")
        dbapi_connection.commit()
