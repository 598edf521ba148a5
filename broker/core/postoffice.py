"""PostOffice: every address and queue of the broker, auto-create and auto-delete, routing.

Sending is two steps ("decide, then commit"): `route()` only collects the queues a message goes
to; `post()` writes what is durable through the journal and, once the journal confirms, puts
the message on its queues and reports back (the producer is settled from that callback):
the one commit path, `commit.Commit`, whose doors are `post`, `post_now` and `post_part`.
"""
from __future__ import annotations

import itertools
import logging
from typing import Callable, Iterator

from . import ports
from .lingering import Lingering
from .standalone import MemoryJournal, NoTimers, WallClock
from .address import Address, QueuePurpose
from .bursts import Burst
from .commit import Commit
from .errors import AddressNotFound
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
        self.commit = Commit(self)  # every plan is stored and placed through it (`post`)
        # `post_now`, the producer's hot door, bound to the commit path (no frame of its own
        # per message; the method below documents it).
        self.post_now = self.commit.now  # type: ignore[method-assign]
        # The counters of deleted queues, so broker-wide totals (metrics) never go down.
        self.retired = {"added": 0, "acked": 0, "delivered": 0, "expired": 0}
        self.timers: NoTimers | None = None
        if call_at is None:
            self.timers = NoTimers()
            call_at = self.timers.call_at
        self.call_at = call_at
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._ids: Iterator[int] = itertools.count(1)
        self._dirty: dict[Queue, None] = {}
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

    def take_ids_from(self, ids: Iterator[int]) -> None:
        """Number new messages from `ids` from now on (a cluster node: blocks of the shared
        counter, so that ids stay unique across nodes) instead of the store's max + 1."""
        self._ids = ids

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
        and the caller uses `post`. (`commit.Commit.now`)"""
        return self.commit.now(plan)

    def post(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
             accepted: bool = True) -> None:
        """Commit a routing plan: durable parts through the journal first (one unit), then onto
        the queues; `done(None)` once it is safe to accept, `done(error)` if the store failed.
        `accepted`: the plan carries a message a producer sent (retention and duplicate
        detection apply), not a copy the broker made (dead letters, expiry). (`commit.Commit.post`)"""
        self.commit.post(plan, done, extra_ops, accepted)

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
        self.commit.place(refs)
        return True

    def post_part(self, plan: Plan, burst: Burst, token: object) -> bool:
        """`post` of a producer's usual plan as a part of `burst` (`core.bursts`): stored with
        the owner's other sends of this turn, settled through the burst with `token`. False
        (nothing done) for any other plan: the caller uses `post`. (`commit.Commit.part`)"""
        return self.commit.part(plan, burst, token)

    @property
    def journal_depth(self) -> int:
        """Sends handed to the journal and not committed yet (the `hermod_journal_depth` gauge)."""
        return self.flow.pending_units

    def retains(self, address_name: str) -> bool:
        """Are messages sent to this address retained (retention_days > 0, a durable store)?"""
        address = self.addresses.get(address_name)
        return address is not None and address.retains

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


__all__ = ["PostOffice", "MemoryJournal", "Consumer", "Queue", "Ref", "MULTICAST", "ANYCAST"]
