"""The one commit path: a routing plan taken through the journal unit, placement on its queues
and completion, for every way a message is stored (each protocol's producers, a producer's
bursts, transactions, management sends, moves and retries, dead-letter and expiry copies).

Three ways in, one set of rules:

- `now(plan)`: the fast path, without callbacks: a plan with nothing to store, nothing paged
  and nothing ahead of it in the journal goes onto its queues at once (True), else nothing is
  done (False) and the caller uses `post`;
- `post(plan, done, extra_ops, accepted)`: the general case (duplicate ids, retention, paging,
  extra operations such as a move's removal); a producer's usual plan (one message to queues
  that take it, nothing else) takes `_one`, without the general bookkeeping;
- `part(plan, burst, token)`: `_one` as a part of a producer's burst (`core/bursts.py`), stored
  with the link's other sends of the turn as one journal unit.

Each send handed to the journal is counted here (`_sent`, `_stored`): the journal budget and the
memory its bytes hold (`FlowControl.unit_submitted`/`unit_done`; `flow.pending_units` is also
the `hermod_journal_depth` gauge), whether it went alone or as a burst's part. Nothing is on a
queue until its unit is stored (`place`); a non-durable message that arrives while durable
units are in flight goes through the journal as an empty unit, so messages reach their queues
in arrival order. In cluster mode, the part of a plan for queues other nodes own is forwarded
to them first (`ports.RemoteQueues`), and the fast paths decline such a plan.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from . import ports
from .errors import QueueNotFound, ResourceLimitExceeded
from .message import ANYCAST, Message
from .queue import Queue, Ref

if TYPE_CHECKING:
    from .bursts import Burst
    from .postoffice import PostOffice

log = logging.getLogger("hermod.core")

Done = Callable[[BaseException | None], None]
Plan = list[tuple[Message, list[Queue]]]


class Commit:
    """The post office's commit path (module docstring); `PostOffice.post`, `post_now` and
    `post_part` are its doors."""

    __slots__ = ("po", "flow")

    def __init__(self, po: PostOffice):
        self.po = po
        self.flow = po.flow

    # -- the fast path ---------------------------------------------------------------------------
    def now(self, plan: Plan) -> bool:
        po = self.po
        if self.flow.pending_units or po.retaining:
            return False
        full = self.flow.full
        remote = po.remote
        for message, queues in plan:
            envelope = message.envelope
            # Only what a producer sent is checked for a duplicate id (`post`: hops == 0), not
            # each divert copy, which would search its joined bytes again: a copy of a message
            # with application properties 6.3-7.1 -> 5.4-5.9 µs (divert copies in process).
            if envelope.app_properties_at >= 0 and not message.hops and po.duplicates.id_of(message) is not None:
                return False
            durable = envelope.durable
            for q in queues:
                if (durable and q.stores) or q.paged or (q.address.pages and full(q.address)):
                    return False
                if remote is not None and remote.elsewhere(q):
                    return False  # forwarded: `post`
        for message, queues in plan:
            if queues:
                if not message.id:
                    message.id = next(po._ids)
                for q in queues:
                    q.enqueue(Ref(message, q))
        return True

    # -- the general case ------------------------------------------------------------------------
    def post(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
             accepted: bool = True) -> None:
        if self.po.remote is not None and self._forward(plan, done, extra_ops, accepted):
            return
        self._here(plan, done, extra_ops, accepted)

    def _forward(self, plan: Plan, done: Done | None, extra_ops: list | None, accepted: bool) -> bool:
        """Cluster mode: forward the plan's queues other nodes own to their owners, then post
        the rest here once every owner accepted its copy; `done(None)` only once every part is
        stored, else the first error, and then nothing was stored here (a refused send is on
        no queue of this node; the original of a move, a dead letter or an expiry stays where
        it is; a copy an owner accepted stays there, and its `_AMQ_DUPL_ID` stamp drops a
        resend). False: nothing is another node's."""
        po = self.po
        remote = po.remote
        assert remote is not None
        here: Plan = []
        away: list[tuple[Message, Queue]] = []
        for message, queues in plan:
            mine = [q for q in queues if not remote.elsewhere(q)]
            if len(mine) != len(queues):
                if not message.id:  # the forwarded copy's stamp names it
                    message.id = po.next_message_id()
                away.extend((message, q) for q in queues if q not in mine)
            here.append((message, mine))
        if not away:
            return False
        finish: Done = done if done is not None else _ignore

        def forwarded(error: BaseException | None) -> None:
            if error is not None:
                finish(error)
            else:
                self._here(here, finish, extra_ops, accepted)
        join = _all_of(len(away), forwarded)
        for message, q in away:
            remote.forward(message, q, join)
        return True

    def _here(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
              accepted: bool = True) -> None:
        """`post` of a plan every queue of which is this node's."""
        if len(plan) == 1 and extra_ops is None and accepted and self._one(plan[0], done):
            return
        po = self.po
        flow = self.flow
        refs: list[Ref] = []
        ops: list[ports.Operation] = list(extra_ops) if extra_ops else []
        remembered: list[tuple[str, str]] = []
        for message, queues in plan:
            if accepted and message.hops == 0:
                if self._is_duplicate(message, ops, remembered):
                    continue
                if po.retaining:
                    self._retain(message, ops)
            if not queues:
                continue
            if not message.id:
                message.id = po.next_message_id()
            mine = [Ref(message, q) for q in queues]
            refs.extend(mine)
            for r in mine:
                q = r.queue
                if q.paged or (q.address.pages and flow.full(q.address) and flow.pages(q)):
                    r.paged = True  # the store (or the spool) holds it; memory only a count
                    r.durable = q.stores
            durable = [r for r in mine if r.durable]
            if durable:
                ops.append(ports.AddMessage(po.message_record(message)))
                ops.extend(ports.AddReference(r.queue.name, message.id) for r in durable)
        for r in refs:
            r.queue.pending += 1  # no auto-delete until the refs are on their queues (`place`)
        if not ops and not flow.pending_units:
            failed = self.place(refs)
            if done is not None:
                done(failed)
            return
        self._submit(ops, refs, sum(r.message.size for r in refs), done, remembered)

    # -- a producer's usual send, alone or as a burst's part --------------------------------------
    def part(self, plan: Plan, burst: Burst, token: object) -> bool:
        if len(plan) != 1:
            return False
        remote = self.po.remote
        if remote is not None and any(remote.elsewhere(q) for q in plan[0][1]):
            return False  # forwarded: `post`
        return self._one(plan[0], None, burst, token)

    def _one(self, destination: tuple[Message, list[Queue]], done: Done | None,
             burst: Burst | None = None, token: object = None) -> bool:
        """`post` of the usual plan, without its general bookkeeping: one message a producer
        sent, to queues it reaches, no duplicate id, nothing retained, nothing paged. False
        (nothing done) for anything else. Q1D on SQLite FULL, with the records as plain slots
        classes (`ports`): broker CPU per 100k messages 3.9 -> 3.4 s (medians of 3-4,
        interleaved, load 1.3-2.4)."""
        message, queues = destination
        po = self.po
        if message.hops or po.retaining or not queues:
            return False
        if message.envelope.app_properties_at >= 0 and po.duplicates.id_of(message) is not None:
            return False
        full = self.flow.full
        for q in queues:
            if q.paged or (q.address.pages and full(q.address)):
                return False
        if not message.id:
            message.id = next(po._ids)
        refs = []
        ops: list[ports.Operation] | None = None
        for q in queues:
            r = Ref(message, q)
            refs.append(r)
            q.pending += 1  # as in `_here`
            if r.durable:
                if ops is None:
                    ops = [ports.AddMessage(po.message_record(message))]
                ops.append(ports.AddReference(q.name, message.id))
        if burst is not None:
            burst.add(ops or [], refs, message.size * len(refs), token)
        elif ops is None and not self.flow.pending_units:
            failed = self.place(refs)
            if done is not None:
                done(failed)
        else:
            self._submit(ops or [], refs, message.size * len(refs), done, ())
        return True

    # -- the journal unit ------------------------------------------------------------------------
    def _submit(self, ops: list, refs: list[Ref], held: int, done: Done | None,
                remembered: list[tuple[str, str]] | tuple) -> None:
        """One send through the journal: a durable message is stored first; a non-durable one
        that arrives while durable messages are still being written goes through as an empty
        unit, so that messages reach their queues in the order they arrived."""
        self.sent(held)

        def committed(error: BaseException | None) -> None:
            self.stored(held)
            if error is None:
                error = self.place(refs)
            else:
                self.not_placed(refs)
            if error is not None:
                for address, duplicate_id in remembered:
                    self.po.duplicates.forget(address, duplicate_id)  # a resend is not a duplicate
            if done is not None:
                done(error)

        self.po.journal.submit(ops, committed)

    def sent(self, held: int) -> None:
        """A send went to the journal, holding `held` bytes of messages until it is stored:
        counted first (a journal may complete at once), the one place a send's unit is
        counted (alone here, or as a burst's part)."""
        self.flow.unit_submitted(held)

    def stored(self, held: int, sends: int = 1) -> None:
        """`sends` sends holding `held` bytes are out of the journal (stored or failed)."""
        self.flow.unit_done(held, sends)

    # -- placement -------------------------------------------------------------------------------
    def not_placed(self, refs: list[Ref]) -> None:
        """Refs whose unit failed: no longer on their way to their queues."""
        for r in refs:
            r.queue.pending -= 1
            if not r.queue.pending and r.queue.idle:
                self.po.queue_idle_check(r.queue)

    def place(self, refs: list[Ref]) -> BaseException | None:
        """Committed refs onto their queues, the paged ones first: paging to the spool can fail
        (disk full), and then the send fails with a condition (returned) rather than hang or
        vanish; the queue keeps paging what comes next. A queue deleted while the unit was
        written (an unsubscribe, a management delete) takes nothing; when that leaves the
        message on no queue and one of them was anycast, the send is refused (QueueNotFound),
        never `accepted` and stored nowhere. Multicast subscriptions that went are a drop by
        design."""
        live: list[Ref] = []
        lost: Queue | None = None
        for r in refs:
            q = r.queue
            q.pending -= 1
            if q.deleted:
                if q.routing_type == ANYCAST:
                    lost = q
                continue
            live.append(r)
        for r in live:
            if r.paged:
                try:
                    r.queue.page_out(r)
                except OSError as error:
                    log.error("queue %s: paging a message failed: %s", r.queue.name, error)
                    return ResourceLimitExceeded(f"paging to disk failed: {error.strerror or error}")
        for r in live:
            if not r.paged:
                r.queue.enqueue(r)
        if lost is not None and not live:
            log.warning("queue %s was deleted while a message for it was being stored", lost.name)
            return QueueNotFound(f"queue {lost.name} was deleted")
        return None

    # -- what a producer's send also records -----------------------------------------------------
    def _is_duplicate(self, message: Message, ops: list, remembered: list) -> bool:
        duplicates = self.po.duplicates
        duplicate_id = duplicates.id_of(message)
        if duplicate_id is None:
            return False
        if duplicates.seen(message.address, duplicate_id):
            log.info("dropped duplicate %s on %s", duplicate_id, message.address)
            return True
        duplicates.remember(message.address, duplicate_id)
        remembered.append((message.address, duplicate_id))
        if self.po.journal.durable:
            ops.append(ports.RememberDuplicateId(message.address, duplicate_id, duplicates.size))
        return False

    def _retain(self, message: Message, ops: list) -> None:
        po = self.po
        if po.retains(message.address):
            if not message.id:
                message.id = po.next_message_id()
            ops.append(ports.RetainMessage(po.message_record(message)))


def _ignore(_error: BaseException | None) -> None:
    """The `done` of a post nobody waits for."""


def _all_of(count: int, done: Done) -> Done:
    """A callback that calls `done` once it was called `count` times: with None when every
    call was, else with the first error."""
    left = [count]
    failed: list[BaseException] = []

    def one(error: BaseException | None) -> None:
        if error is not None:
            failed.append(error)
        left[0] -= 1
        if left[0] == 0:
            done(failed[0] if failed else None)
    return one


__all__ = ["Commit"]
