"""PostOffice: every address and queue of the broker, auto-create and auto-delete, routing.

Sending is two steps ("decide, then commit"): `route()` only collects the queues a message goes
to; `post()` writes what is durable through the journal and, once the journal confirms, puts
the message on its queues and reports back (the producer is settled from that callback).
"""
from __future__ import annotations

import itertools
import logging
from typing import Callable

from . import ports
from .lingering import Lingering
from .standalone import MemoryJournal, NoTimers, WallClock
from .address import Address, QueuePurpose
from .bursts import Burst
from .errors import AddressNotFound, QueueNotFound, ResourceLimitExceeded
from .directory import Directory
from .duplicates import DuplicateIds
from . import copies
from .flow import DROP, FAIL, FlowControl
from .forwarding import Divert
from .message import ANYCAST, MULTICAST, Message
from .queue import Consumer, Queue, Ref
from .latency import LatencyHistogram
from .settings import SettingsRepository
from .topic_index import BindingIndex

log = logging.getLogger("hermod.core")

Done = Callable[[BaseException | None], None]
Plan = list[tuple[Message, list[Queue]]]



class PostOffice(Directory):
    def __init__(self, settings: SettingsRepository | None = None, journal: ports.Journal | None = None,
                 defer: Callable[[Callable[[], None]], None] | None = None,
                 clock: ports.Clock | None = None, annotate: Callable | None = None,
                 compile_filter: Callable[[str], Callable[[Message], bool]] | None = None,
                 call_at: Callable | None = None, spool: ports.Spool | None = None,
                 copy_heads: Callable | None = None):
        """`defer(fn)` runs fn soon on the owning thread (the reactor's `call_soon`); `annotate(message,
        extra)` returns a copy of a message with message annotations added (from the codec);
        `compile_filter(text)` turns a selector into a predicate over a Message; `call_at(ms, fn)`
        runs fn at an epoch-ms time on the owning thread and returns a handle with `cancel()`;
        `spool` keeps what the page policy pages from queues that store nothing; `copy_heads(front,
        envelope, extra, key)` (from the codec; optional) returns a function from a value of
        annotation `key` to the (head, envelope) of a copy of the message `front` begins (its
        `parts()`) with `extra` annotations and that value
        (`copies.divert_copy`: one send's divert copies differ only in their x-opt-ORIG-QUEUE)."""
        self.settings = settings or SettingsRepository()
        self.journal = journal or MemoryJournal()
        self.spool = spool
        self._defer = defer
        self.clock = clock or WallClock()
        self.annotate = annotate
        self.copy_heads = copy_heads
        self.compile_filter = compile_filter
        self.defer = defer or (lambda fn: fn())
        self.flow = FlowControl(self)
        # The counters of deleted queues, so broker-wide totals (metrics) never go down.
        self.retired = {"added": 0, "acked": 0, "delivered": 0, "expired": 0}
        self.timers: NoTimers | None = None
        if call_at is None:
            self.timers = NoTimers()
            call_at = self.timers.call_at
        self.call_at = call_at
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._ids = itertools.count(1)
        self._dirty: dict[Queue, None] = {}
        self._unconfirmed = 0  # posts handed to the journal and not yet committed
        self.message_from_record: Callable[[ports.MessageRecord], Message] | None = None
        self.duplicates = DuplicateIds()
        self.retaining = False  # some address keeps messages (retention_days > 0)
        # Asked before a client's attach or send creates an address or a durable queue
        # ("create_address" / "create_durable_queue", address name); raises NotAuthorized.
        # Durable-subscription replace asks it too ("delete_queue", the old queue's address).
        self.creation_guard: Callable[[str, str], None] | None = None
        # Ports the composition root installs (the security layer decides; the core knows
        # users only by the name a subscription or temporary queue records as its `owner`):
        # whether a user may resume what another attach left (user, owner) ...
        self.may_take_over: Callable[[str | None, str], bool] | None = None
        # ... and whether a wildcard subscription's owner may consume from a matching address:
        # asked when the subscription is bound there (never per message), again on a reload.
        self.may_consume: Callable[[str, str], bool] | None = None
        # Pay for wildcards at bind time, in proportion to what is bound (topic_index.py): the
        # concrete addresses by word, and the bindings that follow a pattern (the multicast
        # queues of wildcard addresses, the diverts by their source) by pattern.
        self.bound = BindingIndex(self._admits)
        self.diverts: list[Divert] = []
        self.delivery_latency = LatencyHistogram()  # arrival to consumer acknowledgement
        self._dispatch_scheduled = False
        self.after_dispatch: list[Callable[[], None]] = []  # e.g. the adapter's output flush
        self.lingering = Lingering(self)  # abandoned nodes waiting out their terminus expiry
        # Cluster mode: the queues other nodes own, whose part of a plan `post` forwards
        # (`ports.RemoteQueues`, set by the cluster module; None: every queue is ours).
        self.remote: ports.RemoteQueues | None = None

    # -- ids and settings ---------------------------------------------------------------------
    def next_message_id(self) -> int:
        return next(self._ids)

    # -- dispatch scheduling -------------------------------------------------------------------
    def schedule(self, queue: Queue) -> None:
        """Mark a queue for dispatch in this reactor turn (once, however many messages came)."""
        queue.dirty = True
        self._dirty[queue] = None
        if not self._dispatch_scheduled and self._defer is not None:
            self._dispatch_scheduled = True
            self._defer(self.run_dispatch)

    def run_dispatch(self) -> None:
        self._dispatch_scheduled = False
        while self._dirty:
            dirty, self._dirty = self._dirty, {}
            for queue in dirty:
                queue.dirty = False
                if not queue.deleted:
                    try:
                        queue.dispatch()
                    except Exception:  # noqa: BLE001 - one queue's fault must not stop the rest
                        log.exception("dispatch failed on queue %s", queue.name)
        for hook in self.after_dispatch:
            hook()


    # -- routing -----------------------------------------------------------------------------------
    def route(self, message: Message, address_name: str, routing_type: str | None,
              queue_name: str | None = None) -> Plan:
        """Decide where `message` goes: a plan of (message, queues) pairs, the message itself
        and any copies diverts made (`bindings.py`). Nothing is changed until `post(plan)`."""
        address = self.addresses.get(address_name)
        if address is None:
            return [(message, [])]
        return address.bindings.plan(message, routing_type, self, queue_name)

    def unrouted(self, plan: Plan, address_name: str, routing_type: str | None,
                 queue_name: str | None = None) -> str | None:
        """Why a send that reached no queue must be refused (its target is gone), or None when
        the plan reached a queue or the bindings drop it by design (`Bindings.refusal`)."""
        for _message, queues in plan:
            if queues:
                return None
        address = self.addresses.get(address_name)
        if address is None:
            return f"address {address_name} does not exist"
        return address.bindings.refusal(routing_type, queue_name)

    def admit(self, plan: Plan) -> str | None:
        """Apply the address-full policy of every destination of a plan that reaches several
        (composite parts, divert and composite copies), as a direct send does: `fail` refuses
        the whole send (returns the full address; nothing is posted), `drop` removes that
        destination's queues from the plan, `page` is left to `post`, `block` is the
        producer's credit (`links.blocked_downstream`)."""
        if self._none_full(plan):
            return None
        verdicts: dict[str, str | None] = {}
        for i, (message, queues) in enumerate(plan):
            kept = []
            for q in queues:
                name = q.address.name
                if name not in verdicts:
                    verdicts[name] = self.flow.verdict(name)
                verdict = verdicts[name]
                if verdict == FAIL:
                    return name
                if verdict != DROP:
                    kept.append(q)
            if len(kept) != len(queues):
                plan[i] = (message, kept)
        return None

    def resolve_send_routing_type(self, name: str, rt: str | None) -> str | None:
        """Rules 3-4 of a send's routing type: an existing address with one routing type gives
        it; both give None (all queues); a new address takes the settings' default."""
        if rt is not None:
            return rt
        address = self.addresses.get(name)
        if address is not None and address.routing_types:
            return next(iter(address.routing_types)) if len(address.routing_types) == 1 else None
        return self.settings_for(name).default_routing_type

    def forward_target(self, name: str, rt: str | None) -> Address:
        """Where a divert copy with routing type `rt` goes: `ensure_send_target` of the send's
        routing type (`resolve_send_routing_type`), without its settings lookups when the
        address exists and takes such a send as it is (every copy but the first)."""
        address = self.addresses.get(name)
        if address is not None:
            types = address.routing_types
            if rt is None and len(types) == 1:
                rt = next(iter(types))  # as resolve_send_routing_type gives it
            if types and (rt is None or rt in types) and (rt != ANYCAST or address.bindings.anycast):
                return address
        return self.ensure_send_target(name, self.resolve_send_routing_type(name, rt))

    def ensure_send_target(self, name: str, rt: str | None) -> Address:
        """A multicast send needs the address; an anycast send also needs an anycast queue
        (Hermod checks the queue's routing type, unlike Artemis). Created when allowed."""
        if self.creation_guard is not None:  # both checks before anything is made
            existing, settings = self.addresses.get(name), self.settings_for(name)
            if existing is None and settings.auto_create_addresses:
                self.creation_guard("create_address", name)
            if rt == ANYCAST and (existing is None or not existing.bindings.anycast) and settings.auto_create_queues:
                self.creation_guard("create_durable_queue", name)
        try:
            address = self.ensure_address(name, rt)
        except AddressNotFound:
            raise AddressNotFound(f"target address {name} does not exist") from None
        if rt == ANYCAST and not address.bindings.anycast:
            if not self.settings_for(name).auto_create_queues:
                raise AddressNotFound(f"target address {name} has no anycast queue")
            self.create_queue(name, name, ANYCAST, auto_created=True, purpose=QueuePurpose.AUTO)
        return address

    def _none_full(self, plan: Plan) -> bool:
        """No destination of `plan` is full and memory is under its limit: every verdict would
        be None (`FlowControl.verdict`), found without a lookup per address."""
        flow = self.flow
        if flow.memory_used + flow.pending_bytes + flow.reserved >= flow.memory_limit:
            return False
        for _message, queues in plan:
            for q in queues:
                address = q.address
                if 0 <= address.limit <= address.size:
                    return False
        return True

    def post_now(self, plan: Plan) -> bool:
        """The common case, without callbacks: a plan with nothing to store and nothing ahead of
        it in the journal goes onto its queues at once (True). Otherwise nothing is done (False)
        and the caller uses `post`."""
        if self._unconfirmed or self.retaining:
            return False
        full = self.flow.full
        remote = self.remote
        for message, queues in plan:
            envelope = message.envelope
            # Only what a producer sent is checked for a duplicate id (`post`: hops == 0), not
            # each divert copy, which would search its joined bytes again: a copy of a message
            # with application properties 6.3-7.1 -> 5.4-5.9 µs (divert copies in process).
            if envelope.app_properties_at >= 0 and not message.hops and self.duplicates.id_of(message) is not None:
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
                    message.id = next(self._ids)
                for q in queues:
                    q.enqueue(Ref(message, q))
        return True

    def post(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
             accepted: bool = True) -> None:
        """Commit a routing plan: durable parts through the journal first (one unit), then onto
        the queues; `done(None)` once it is safe to accept, `done(error)` if the store failed.
        `accepted`: the plan carries a message a producer sent (retention and duplicate
        detection apply), not a copy the broker made (dead letters, expiry). In cluster mode
        the part of the plan for queues other nodes own is forwarded to them (`_forward`)."""
        if self.remote is not None and self._forward(plan, done, extra_ops, accepted):
            return
        self._post_here(plan, done, extra_ops, accepted)

    def _forward(self, plan: Plan, done: Done | None, extra_ops: list | None, accepted: bool) -> bool:
        """Cluster mode: forward the plan's queues other nodes own to their owners, then post
        the rest here once every owner accepted its copy; `done(None)` only once every part is
        stored, else the first error, and then nothing was stored here (a refused send is on
        no queue of this node; the original of a move, a dead letter or an expiry stays where
        it is; a copy an owner accepted stays there, and its `_AMQ_DUPL_ID` stamp drops a
        resend). False: nothing is another node's."""
        remote = self.remote
        assert remote is not None
        here: Plan = []
        away: list[tuple[Message, Queue]] = []
        for message, queues in plan:
            mine = [q for q in queues if not remote.elsewhere(q)]
            if len(mine) != len(queues):
                if not message.id:  # the forwarded copy's stamp names it
                    message.id = self.next_message_id()
                away.extend((message, q) for q in queues if q not in mine)
            here.append((message, mine))
        if not away:
            return False
        finish: Done = done if done is not None else _ignore

        def forwarded(error: BaseException | None) -> None:
            if error is not None:
                finish(error)
            else:
                self._post_here(here, finish, extra_ops, accepted)
        join = _all_of(len(away), forwarded)
        for message, q in away:
            remote.forward(message, q, join)
        return True

    def _post_here(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
                   accepted: bool = True) -> None:
        """`post` of a plan every queue of which is this node's."""
        if len(plan) == 1 and extra_ops is None and accepted and self._post_one(plan[0], done):
            return
        refs: list[Ref] = []
        ops: list[ports.Operation] = list(extra_ops) if extra_ops else []
        remembered: list[tuple[str, str]] = []
        for message, queues in plan:
            if accepted and message.hops == 0:
                if self._is_duplicate(message, ops, remembered):
                    continue
                if self.retaining:
                    self._retain(message, ops)
            if not queues:
                continue
            if not message.id:
                message.id = self.next_message_id()
            mine = [Ref(message, q) for q in queues]
            refs.extend(mine)
            for r in mine:
                q = r.queue
                if q.paged or (q.address.pages and self.flow.full(q.address) and self.flow.pages(q)):
                    r.paged = True  # the store (or the spool) holds it; memory only a count
                    r.durable = q.stores
            durable = [r for r in mine if r.durable]
            if durable:
                ops.append(ports.AddMessage(self.message_record(message)))
                ops.extend(ports.AddReference(r.queue.name, message.id) for r in durable)
        for r in refs:
            r.queue.pending += 1  # no auto-delete until the refs are on their queues (_place)
        if not ops and not self._unconfirmed:
            failed = self._place(refs)
            if done is not None:
                done(failed)
            return
        self._submit(ops, refs, sum(r.message.size for r in refs), done, remembered)

    def post_unordered(self, plan: Plan) -> bool:
        """Place a plan whose every queue is a temporary one of this node at once, not behind the
        journal's unconfirmed units: nothing of it is stored, and a management answer shares its
        caller's reply queue with no producer's messages, so waiting for the store only hides
        the answer (`hermod status` during a store outage). False, and nothing done, otherwise."""
        remote = self.remote
        for message, queues in plan:
            if not queues or any(not q.temporary or q.stores or (remote is not None and remote.elsewhere(q))
                                 for q in queues):
                return False
        refs = []
        for message, queues in plan:
            if not message.id:
                message.id = self.next_message_id()
            for q in queues:
                q.pending += 1  # as in `post`
                refs.append(Ref(message, q))
        self._place(refs)
        return True

    def post_part(self, plan: Plan, burst: Burst, token: object) -> bool:
        """`post` of a producer's usual plan (`_post_one`) as a part of `burst` (`core.bursts`):
        stored with the owner's other sends of this turn, settled through the burst with
        `token`. False (nothing done) for any other plan: the caller uses `post`."""
        if len(plan) != 1:
            return False
        remote = self.remote
        if remote is not None and any(remote.elsewhere(q) for q in plan[0][1]):
            return False  # forwarded: `post`
        return self._post_one(plan[0], None, burst, token)

    def _post_one(self, destination: tuple[Message, list[Queue]], done: Done | None,
                  burst: Burst | None = None, token: object = None) -> bool:
        """`post` of the usual plan, without its general bookkeeping: one message a producer
        sent, to queues it reaches, no duplicate id, nothing retained, nothing paged. False
        (nothing done) for anything else. Q1D on SQLite FULL, with the records as plain slots
        classes (`ports`): broker CPU per 100k messages 3.9 -> 3.4 s (medians of 3-4,
        interleaved with the build before, load 1.3-2.4)."""
        message, queues = destination
        if message.hops or self.retaining or not queues:
            return False
        if message.envelope.app_properties_at >= 0 and self.duplicates.id_of(message) is not None:
            return False
        full = self.flow.full
        for q in queues:
            if q.paged or (q.address.pages and full(q.address)):
                return False
        if not message.id:
            message.id = next(self._ids)
        refs = []
        ops: list[ports.Operation] | None = None
        for q in queues:
            r = Ref(message, q)
            refs.append(r)
            q.pending += 1  # as in `post`
            if r.durable:
                if ops is None:
                    ops = [ports.AddMessage(self.message_record(message))]
                ops.append(ports.AddReference(q.name, message.id))
        if burst is not None:
            burst.add(ops or [], refs, message.size * len(refs), token)
        elif ops is None and not self._unconfirmed:
            failed = self._place(refs)
            if done is not None:
                done(failed)
        else:
            self._submit(ops or [], refs, message.size * len(refs), done, ())
        return True

    def _submit(self, ops: list, refs: list[Ref], held: int, done: Done | None,
                remembered: list[tuple[str, str]] | tuple) -> None:
        """Through the journal: a durable message is stored first; a non-durable one that
        arrives while durable messages are still being written goes through as an empty unit,
        so that messages reach their queues in the order they arrived. `held`: the bytes of
        the refs, counted against the memory limit until the unit is done."""
        self._unconfirmed += 1
        flow = self.flow
        flow.unit_submitted(held)

        def committed(error: BaseException | None) -> None:
            self._unconfirmed -= 1
            flow.unit_done(held)
            if error is None:
                error = self._place(refs)
            else:
                self._not_placed(refs)
            if error is not None:
                for address, duplicate_id in remembered:
                    self.duplicates.forget(address, duplicate_id)  # a resend is not a duplicate
            if done is not None:
                done(error)

        self.journal.submit(ops, committed)

    def _not_placed(self, refs: list[Ref]) -> None:
        """Refs whose unit failed: no longer on their way to their queues."""
        for r in refs:
            r.queue.pending -= 1
            if not r.queue.pending and r.queue.idle:
                self.queue_idle_check(r.queue)

    def _place(self, refs: list[Ref]) -> BaseException | None:
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

    def _is_duplicate(self, message: Message, ops: list, remembered: list) -> bool:
        duplicate_id = self.duplicates.id_of(message)
        if duplicate_id is None:
            return False
        if self.duplicates.seen(message.address, duplicate_id):
            log.info("dropped duplicate %s on %s", duplicate_id, message.address)
            return True
        self.duplicates.remember(message.address, duplicate_id)
        remembered.append((message.address, duplicate_id))
        if self.journal.durable:
            ops.append(ports.RememberDuplicateId(message.address, duplicate_id, self.duplicates.size))
        return False

    def retains(self, address_name: str) -> bool:
        """Are messages sent to this address retained (retention_days > 0, a durable store)?"""
        address = self.addresses.get(address_name)
        return address is not None and address.retains

    def _retain(self, message: Message, ops: list) -> None:
        if self.retains(message.address):
            if not message.id:
                message.id = self.next_message_id()
            ops.append(ports.RetainMessage(self.message_record(message)))

    def message_record(self, message: Message) -> ports.MessageRecord:
        # Positional, in the record's field order: keywords cost 0.25 us more per record.
        return ports.MessageRecord(message.id, message.address, message.encoded, message.routing_type,
                                   message.priority, message.expiration, message.scheduled_time,
                                   message.arrival)

    # -- dead letters, expiry (memory and address sizes: `self.flow`) --------------------------------
    def dead_letter(self, ref: Ref, reason: str, done: Done | None = None,
                    annotations: dict | None = None) -> None:
        """Move a message to its queue's dead-letter address (see copies.py)."""
        copies.dead_letter(self, ref, reason, done, annotations)

    def expire(self, ref: Ref) -> None:
        """Move an expired message to its queue's expiry address (see copies.py)."""
        copies.expire(self, ref)

    def expire_scan(self) -> int:
        return copies.expire_scan(self)

    # -- recovery ---------------------------------------------------------------------------------
    def recover(self, recovered: ports.Recovered, make_message: Callable[[ports.MessageRecord], Message],
                window: int | None = None) -> None:
        """Rebuild addresses, queues and messages from the store, in their original order. With
        a `window`, a queue that has more in the store reads the rest as consumers drain it."""
        self.message_from_record = make_message
        for a in recovered.addresses:
            self.create_address(a.name, a.routing_types, auto_created=a.auto_created, persist=False)
        for q in recovered.queues:
            self.create_queue(q.name, q.address, q.routing_type, durable=True, filter_text=q.filter,
                              max_consumers=q.max_consumers, exclusive=q.exclusive,
                              last_value_key=q.last_value_key, auto_created=q.auto_created,
                              purpose=q.purpose, extra=dict(q.extra), persist=False)
        shared: dict[int, Message] = {}
        for queue_name, stored in recovered.references.items():
            queue = self.queues.get(queue_name)
            if queue is None:
                continue
            for s in stored:
                message = shared.get(s.message.id)
                if message is None:
                    message = shared[s.message.id] = make_message(s.message)
                queue.recover(Ref(message, queue, s.delivery_count))
            if queue_name in recovered.more or (window is not None and len(stored) >= window):
                queue.paged = -1  # more in the store than was read: read on as it drains
        self._ids = itertools.count(max(recovered.next_message_id, 1))
        self.duplicates.load(recovered.duplicate_ids)


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


__all__ = ["PostOffice", "MemoryJournal", "Consumer", "Queue", "Ref", "MULTICAST", "ANYCAST"]
