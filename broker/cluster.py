"""Several live brokers on one PostgreSQL ([ha] mode = "cluster"; docs/scale-out.md).

Theory of operation. The store half is `store.ownership.Membership`; this module runs it in
`hermod run`:

- Start: the journal is opened first (schema upgrade, the store lock held SHARED, the ownership
  fence installed); then the node joins (`cluster_nodes` row) and claims the durable queues it
  may take, at most ceil(queues / live nodes) in all, and recovers the references of those only
  (every queue's definition is recovered, so it can route to them and redirect consumers).
- Liveness: `broker.ha.LeaseKeeper` renews the node row every period on a thread and stops the
  broker before the row can expire (the same timing as shared-store HA).
- Rounds: a second thread, every renew period, claims queues with no live owner (a dead node's,
  never more than the spread) and hands them to the reactor, which pages their messages in from
  the store; it also refreshes the routing cache (`remote`: queue -> owning node and its
  announce URL; `mine`), which the broker reads to redirect a consumer attach
  (`core.errors.QueueElsewhere`) and to forward sends, and tops up the block of message ids.
- Freshness: a third thread LISTENs for owner changes (`Membership.listen`, pg_notify at every
  claim, release, creation) and re-reads the cache when one commits. A queue name the cache does
  not know at all (a claim whose notification is still on its way) is looked up once on the
  reactor before the attach or send is answered (`owner_of`): one primary-key read, then the
  name is remembered as "nobody else's" until a notification names it again.
- Definitions: a queue another node created after this one started (a durable subscription, a
  virtual-topic queue, an auto-created queue) is read from the store when the owners are
  re-read and defined here too (never stored, never consumed here), so routing reaches it: a
  multicast send on this node is forwarded to another node's subscription rather than dropped
  for want of one (`_learn`).
- Commits: the journal runs `Membership.fence` in every transaction, so a node that lost a
  queue commits nothing more to it, and a queue created here becomes ours in the same commit.
- Message ids come from blocks of a shared counter (`IdBlocks`), never `max(id) + 1`.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Callable

from hermod.store import recovery
from hermod.store.errors import StoreError
from hermod.store.ownership import EVERY_QUEUE, Membership

from .core import errors
from .core.message import MULTICAST
from .ha import LeaseKeeper, renew_period

log = logging.getLogger("hermod.cluster")

ID_BLOCK = 10_000  # message ids per block: one counter-row update per this many messages
CHECKED_MAX = 100_000  # names remembered as looked up and nobody else's (then forgotten at once)


class IdBlocks:
    """An iterator of message ids from blocks of the shared counter. The rounds thread fetches
    the next block while half of the current one is left, so the reactor waits for the store
    only if ids run out within one renew period."""

    def __init__(self, allocate: Callable[[int], range], size: int = ID_BLOCK) -> None:
        self._allocate = allocate
        self._size = size
        self._lock = threading.Lock()
        self._current = iter(allocate(size))
        self._left = size
        self._next: range | None = None

    def __iter__(self) -> "IdBlocks":
        return self

    def __next__(self) -> int:
        with self._lock:
            if self._left == 0:
                block, self._next = self._next, None
                if block is None:
                    block = self._allocate(self._size)  # out of ids: wait for the store once
                self._current, self._left = iter(block), len(block)
            self._left -= 1
            return next(self._current)

    def top_up(self) -> None:
        """From the rounds thread: the next block, fetched before it is needed."""
        with self._lock:
            if self._next is not None or self._left > self._size // 2:
                return
        block = self._allocate(self._size)
        with self._lock:
            if self._next is None:
                self._next = block


class _NodeLease:
    """The node row as `LeaseKeeper` renews it (the shape of `store.lease.Lease`)."""

    def __init__(self, cluster: "Cluster") -> None:
        self._cluster = cluster
        self.lease_s = cluster.membership.lease_s

    def renew(self) -> bool:
        return self._cluster.membership.renew()

    def backups(self) -> list[str]:
        """The other live nodes: clients get them in `failover-server-list`."""
        return self._cluster.peers()

    def resign(self) -> None:
        self._cluster.stop_rounds()
        self._cluster.membership.leave()

    def close(self) -> None:
        self._cluster.stop_rounds()


class Cluster:
    def __init__(self, cfg, engine, where: str) -> None:
        from .cluster_forward import peer_login
        self.login = peer_login(cfg.ha)  # LoginError (one line) when its variable is not set
        self.membership = Membership(engine, where, cfg.ha.node, cfg.ha.lease_s, cfg.ha.announce)
        self._engine = engine
        self.owned: frozenset[str] = frozenset()  # claimed at join (what recovery reads)
        self.remote: dict[str, tuple[str, str | None]] = {}
        self.mine: frozenset[str] = frozenset()  # queues this node owns, as last read
        self._checked: set[str] = set()  # looked up on a miss: nobody else's (see owner_of)
        self._checked_lock = threading.Lock()
        self.keeper: LeaseKeeper | None = None
        self.ids: IdBlocks | None = None
        self._broker = None
        self._loop = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener: threading.Thread | None = None
        self._defined: set[str] = set()  # queue names whose definitions this node has

    # -- start (blocking: run off the reactor) ---------------------------------------------------

    def join(self) -> None:
        """Become a live node, claim our share of the queues, start renewing."""
        sent = time.monotonic()
        self.membership.join()
        self.keeper = LeaseKeeper(_NodeLease(self), sent)
        self.owned = frozenset(self._claim_round())
        self._refresh()
        self.ids = IdBlocks(self.membership.allocate)
        log.info("cluster node %s owns %d queue(s) at start", self.membership.node, len(self.owned))

    def serve(self, broker, loop, announce: str) -> None:
        """The broker is about to serve on `announce`: publish it, start the rounds."""
        from .cluster_forward import Forwarder
        self._broker = broker
        self._loop = loop
        broker.forwarder = Forwarder(broker, loop, self.membership.node, self.owner_of, self.login,
                                     origin=self.membership.holder)
        broker.postoffice.remote = broker.forwarder  # every stored message's way (core.ports)
        self._defined = set(broker.postoffice.queues)
        if self.membership.announce is None:
            self.membership.set_announce(announce)
        self._thread = threading.Thread(target=self._rounds, name="hermod-cluster", daemon=True)
        self._thread.start()
        self._listener = threading.Thread(
            target=self.membership.listen, name="hermod-cluster-owners", daemon=True,
            args=(self._stop, self._changed, renew_period(self.membership.lease_s)))
        self._listener.start()

    def peers(self) -> list[str]:
        return [announce for node, announce in self.membership.live_nodes().items()
                if node != self.membership.node and announce]

    def stop_rounds(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._listener):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=self.membership.lease_s)

    # -- the broker's questions (reactor) --------------------------------------------------------

    def check_consumer(self, address: str, routing_type: str | None, queue: str | None,
                       subscription: str | None) -> None:
        """Raise QueueElsewhere when the queue this consumer would read is another node's."""
        name = queue or subscription or (address if routing_type != MULTICAST else None)
        owner = self.owner_of(name) if name else None
        if owner is None:
            return
        node, announce = owner
        if not announce:
            raise errors.IllegalState(f"queue {name} is owned by cluster node {node}, which has "
                                      "not announced where it listens yet; try again")
        raise errors.QueueElsewhere(f"queue {name} is owned by cluster node {node} at {announce}",
                                    node, announce, address)

    def owner_of(self, queue: str) -> tuple[str, str | None] | None:
        """(node, announce) of the other live node that owns `queue`, or None (ours, or nobody's).
        A name the cache does not know is read from the store once (blocking the reactor for one
        primary-key lookup; then cached either way until a notification names it)."""
        owner = self.remote.get(queue)
        if owner is not None or queue in self.mine or queue in self._checked:
            return owner
        try:
            found = self.membership.owner(queue)
        except StoreError as error:  # the fence still decides; not asked again until the
            found = None             # listener reconnects (a full re-read) or names it
            log.warning("cluster node %s could not look up the owner of %s: %s",
                        self.membership.node, queue, error)
        if found is not None and found.node != self.membership.node:
            self.remote[queue] = owner = (found.node, found.announce)
            return owner
        with self._checked_lock:
            if len(self._checked) >= CHECKED_MAX:
                self._checked.clear()
            self._checked.add(queue)
        return None

    # -- the rounds and listener threads ---------------------------------------------------------

    def _refresh(self) -> None:
        self.mine, self.remote = self.membership.owners_view()
        self._learn()

    def _learn(self) -> None:
        """From the rounds or listener thread: the definitions of other nodes' queues this node
        does not have yet, read from the store and handed to the reactor (`_define`)."""
        if self._loop is None:
            return  # joining: recovery reads every definition
        new = sorted(name for name in self.remote if name not in self._defined)
        if not new:
            return
        addresses, queues = recovery.definitions(self._engine, new)
        self._defined.update(new)
        self._loop.call_soon_threadsafe(self._define, addresses, queues)

    def _define(self, addresses, queues) -> None:
        """On the reactor: other nodes' new queues, defined here for routing only."""
        po = self._broker.postoffice
        for a in addresses:
            if a.name not in po.addresses:
                po.create_address(a.name, a.routing_types, auto_created=a.auto_created, persist=False)
        for q in queues:
            if q.name not in po.queues:
                po.create_queue(q.name, q.address, q.routing_type, durable=True, filter_text=q.filter,
                                max_consumers=q.max_consumers, exclusive=q.exclusive,
                                last_value_key=q.last_value_key, auto_created=q.auto_created,
                                purpose=q.purpose, extra=dict(q.extra), persist=False)

    def _changed(self, names: set[str]) -> None:
        """From the listener: owners of `names` changed (EVERY_QUEUE: any); re-read them all."""
        with self._checked_lock:
            if EVERY_QUEUE in names:
                self._checked.clear()
            else:
                self._checked -= names
        try:
            self._refresh()
        except StoreError as error:
            log.warning("cluster node %s could not re-read queue owners: %s",
                        self.membership.node, error)

    def _claim_round(self) -> list[str]:
        """Claim queues with no live owner, up to our share; the names claimed."""
        total, live, mine, claimable = self.membership.census()
        room = math.ceil(total / max(1, live)) - mine
        claimed = []
        for name in claimable:
            if len(claimed) >= room:
                break
            if self.membership.claim(name) is not None:
                claimed.append(name)
        return claimed

    def _rounds(self) -> None:
        period = renew_period(self.membership.lease_s)
        failing = False
        while not self._stop.wait(period):
            try:
                claimed = self._claim_round()
                if claimed:
                    addresses, queues = recovery.definitions(self._engine, claimed)
                    self._loop.call_soon_threadsafe(self._adopt, addresses, queues)
                self._refresh()
                self.ids.top_up()
                failing = False
            except StoreError as error:
                if not failing:
                    log.warning("cluster round of %s failed: %s", self.membership.node, error)
                failing = True
            except RuntimeError:  # the loop is closed: the broker is stopping
                return

    def _adopt(self, addresses, queues) -> None:
        """On the reactor: queues just claimed (a dead node's) are read in from the store."""
        po = self._broker.postoffice
        for a in addresses:
            po.create_address(a.name, a.routing_types, auto_created=a.auto_created, persist=False)
        for q in queues:
            queue = po.queues.get(q.name)
            if queue is None:
                queue = po.create_queue(
                    q.name, q.address, q.routing_type, durable=True, filter_text=q.filter,
                    max_consumers=q.max_consumers, exclusive=q.exclusive,
                    last_value_key=q.last_value_key, auto_created=q.auto_created,
                    purpose=q.purpose, extra=dict(q.extra), persist=False)
            log.info("cluster node %s took over queue %s", self.membership.node, q.name)
            queue.paged = -1  # everything it has is in the store: read it as consumers drain it
            queue.dispatch()
