"""PostOffice: every address and queue of the broker, auto-create and auto-delete, routing.

Sending is two steps ("decide, then commit"): `route()` only collects the queues a message goes
to; `post()` writes what is durable through the journal and, once the journal confirms, puts
the message on its queues and reports back (the producer is settled from that callback).
"""
from __future__ import annotations

import itertools
import logging
import time
from typing import Callable

from . import ports
from .address import Address
from .errors import AddressNotFound, QueueNotFound
from .message import ANYCAST, MULTICAST, Message
from .queue import Consumer, Queue, Ref
from .settings import AddressSettings, SettingsRepository

log = logging.getLogger("hermod.core")

Done = Callable[[BaseException | None], None]


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class PostOffice:
    def __init__(self, settings: SettingsRepository | None = None, journal: ports.Journal | None = None,
                 defer: Callable[[Callable[[], None]], None] | None = None,
                 clock: ports.Clock | None = None, annotate: Callable | None = None,
                 compile_filter: Callable[[str], Callable[[Message], bool]] | None = None):
        """`defer(fn)` runs fn soon on the owning thread (the reactor's `call_soon`); `annotate(message,
        extra)` returns a copy of a message with message annotations added (from the codec);
        `compile_filter(text)` turns a selector into a predicate over a Message."""
        self.settings = settings or SettingsRepository()
        self.journal = journal or MemoryJournal()
        self._defer = defer
        self.clock = clock or WallClock()
        self.annotate = annotate
        self.compile_filter = compile_filter
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._ids = itertools.count(1)
        self._dirty: dict[Queue, None] = {}
        self._unconfirmed = 0  # posts handed to the journal and not yet committed
        self._dispatch_scheduled = False
        self.after_dispatch: list[Callable[[], None]] = []  # e.g. the adapter's output flush

    # -- ids and settings ---------------------------------------------------------------------
    def next_message_id(self) -> int:
        return next(self._ids)

    def settings_for(self, address: str) -> AddressSettings:
        return self.settings.for_address(address)

    # -- dispatch scheduling -------------------------------------------------------------------
    def schedule(self, queue: Queue) -> None:
        """Mark a queue for dispatch in this reactor turn (once, however many messages came)."""
        self._dirty[queue] = None
        if not self._dispatch_scheduled and self._defer is not None:
            self._dispatch_scheduled = True
            self._defer(self.run_dispatch)

    def run_dispatch(self) -> None:
        self._dispatch_scheduled = False
        while self._dirty:
            dirty, self._dirty = self._dirty, {}
            for queue in dirty:
                if not queue.deleted:
                    try:
                        queue.dispatch()
                    except Exception:  # noqa: BLE001 - one queue's fault must not stop the rest
                        log.exception("dispatch failed on queue %s", queue.name)
        for hook in self.after_dispatch:
            hook()

    # -- addresses -----------------------------------------------------------------------------
    def create_address(self, name: str, routing_types, *, auto_created: bool = False,
                       temporary: bool = False, persist: bool = True) -> Address:
        address = self.addresses.get(name)
        if address is None:
            address = Address(name, set(routing_types), auto_created=auto_created, temporary=temporary)
            self.addresses[name] = address
            if persist and not temporary:
                self._persist_address(address)
        elif not set(routing_types) <= address.routing_types:
            address.routing_types |= set(routing_types)
            if persist and not temporary:
                self._persist_address(address)
        return address

    def _persist_address(self, address: Address) -> None:
        if self.journal.durable:
            self.journal.submit([ports.PutAddress(ports.AddressRecord(
                address.name, frozenset(address.routing_types), address.auto_created))], None)

    def delete_address(self, name: str) -> None:
        address = self.addresses.pop(name, None)
        if address is None:
            return
        for queue in list(address.queues.values()):
            self.delete_queue(queue.name)
        if self.journal.durable and not address.temporary:
            self.journal.submit([ports.DeleteAddress(name)], None)

    def ensure_address(self, name: str, routing_type: str | None) -> Address:
        """The address for a link or a relayed message: created, or given the routing type it
        lacks, when the settings allow; else AddressNotFound."""
        address = self.addresses.get(name)
        settings = self.settings_for(name)
        if address is None:
            if not settings.auto_create_addresses:
                raise AddressNotFound(f"address {name} does not exist")
            return self.create_address(name, {routing_type or settings.default_routing_type},
                                       auto_created=True)
        if routing_type is not None and routing_type not in address.routing_types:
            if not settings.auto_create_addresses:
                raise AddressNotFound(f"address {name} has no {routing_type} routing type")
            self.create_address(name, {routing_type})
        return address

    # -- queues ----------------------------------------------------------------------------------
    def create_queue(self, name: str, address_name: str, routing_type: str = ANYCAST, *,
                     durable: bool = True, filter_text: str | None = None, filter=None,
                     max_consumers: int = -1, exclusive: bool = False,
                     last_value_key: str | None = None, auto_created: bool = False,
                     purpose: str = "configured", temporary: bool = False,
                     extra: dict | None = None, persist: bool = True) -> Queue:
        existing = self.queues.get(name)
        if existing is not None:
            return existing
        address = self.addresses.get(address_name)
        if address is None:
            address = self.create_address(address_name, {routing_type}, auto_created=auto_created,
                                          temporary=temporary, persist=persist)
        elif routing_type not in address.routing_types:
            self.create_address(address_name, {routing_type}, persist=persist)
        if filter is None and filter_text:
            filter = self.compile_filter(filter_text) if self.compile_filter else None
        queue = Queue(self, name, address, routing_type, durable=durable, filter=filter,
                      filter_text=filter_text, max_consumers=max_consumers, exclusive=exclusive,
                      last_value_key=last_value_key, auto_created=auto_created, purpose=purpose,
                      temporary=temporary, extra=extra)
        self.queues[name] = queue
        address.bind(queue)
        if persist and queue.durable and self.journal.durable:
            self.journal.submit([ports.PutQueue(queue.record())], None)
        log.debug("created queue %s on %s (%s)", name, address_name, routing_type)
        return queue

    def delete_queue(self, name: str) -> None:
        queue = self.queues.pop(name, None)
        if queue is None:
            return
        queue.deleted = True
        queue.address.unbind(queue)
        for consumer in list(queue.consumers):
            consumer.link.queue_deleted(consumer)
        queue.consumers.clear()
        queue.messages.clear()
        if queue.durable and self.journal.durable:
            self.journal.submit([ports.DeleteQueue(name)], None)
        address = queue.address
        if (not address.queues and address.auto_created
                and self.settings_for(address.name).auto_delete_addresses
                and self.addresses.get(address.name) is address and not address.temporary):
            self.delete_address(address.name)
        elif address.temporary and not address.queues:
            self.addresses.pop(address.name, None)

    def queue_idle_check(self, queue: Queue) -> None:
        """Auto-created queues go once they have neither consumers nor messages."""
        if (queue.auto_created and not queue.consumers and not queue.messages
                and not queue.delivering and not queue.deleted and queue.ever_consumed
                and self.settings_for(queue.address.name).auto_delete_queues):
            self.delete_queue(queue.name)

    def find_queue(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            raise QueueNotFound(f"queue {name} does not exist")
        return queue

    # -- routing -----------------------------------------------------------------------------------
    def route(self, message: Message, address_name: str, routing_type: str | None,
              queue_name: str | None = None) -> list[Queue]:
        """The queues that take `message` sent to `address_name` (nothing is changed)."""
        address = self.addresses.get(address_name)
        if address is None:
            return []
        if queue_name is not None:
            queue = address.queues.get(queue_name)
            return [queue] if queue is not None and queue.accepts(message) else []
        out: list[Queue] = []
        address.route(message, routing_type, out)
        return out

    def post(self, message: Message, queues: list[Queue], done: Done | None = None) -> None:
        """Commit a routed message: durable parts through the journal first, then onto the
        queues; `done(None)` once it is safe to accept, `done(error)` if the store failed."""
        if not message.id:
            message.id = self.next_message_id()
        refs = [Ref(message, q) for q in queues]
        durable = [r for r in refs if r.durable]
        if not durable and not self._unconfirmed:
            for r in refs:
                r.queue.enqueue(r)
            if done is not None:
                done(None)
            return
        # Through the journal: a durable message is stored first; a non-durable one that arrives
        # while durable messages are still being written goes through as an empty unit, so that
        # messages reach their queues in the order they arrived.
        ops: list[ports.Operation] = []
        if durable:
            ops.append(ports.AddMessage(self.message_record(message)))
            ops.extend(ports.AddReference(r.queue.name, message.id) for r in durable)
        self._unconfirmed += 1

        def committed(error: BaseException | None) -> None:
            self._unconfirmed -= 1
            if error is None:
                for r in refs:
                    r.queue.enqueue(r)
            if done is not None:
                done(error)

        self.journal.submit(ops, committed)

    def message_record(self, message: Message) -> ports.MessageRecord:
        return ports.MessageRecord(
            id=message.id, address=message.address, encoded=message.encoded,
            routing_type=message.routing_type, priority=message.priority,
            expiration=message.expiration, arrival=message.arrival)

    # -- dead letters -------------------------------------------------------------------------------
    def dead_letter(self, ref: Ref, reason: str, done: Done | None = None) -> None:
        """Move a message to its address's dead-letter address in one journal unit. The copy
        carries x-opt-ORIG-* annotations; with no dead-letter address the message is dropped."""
        queue = ref.queue
        queue.remove_ref(ref)
        message = ref.message
        dla = self.settings_for(queue.address.name).dead_letter_address
        ops: list[ports.Operation] = []
        if ref.durable:
            ops.append(ports.DeleteReference(queue.name, message.id))
        targets: list[Queue] = []
        copy = None
        if dla and self.annotate is not None and dla != queue.address.name:
            extra = {"x-opt-ORIG-ADDRESS": message.address, "x-opt-ORIG-QUEUE": queue.name,
                     "x-opt-ORIG-MESSAGE-ID": message.id}
            if message.routing_type is not None:
                extra["x-opt-ORIG-ROUTING-TYPE"] = 1 if message.routing_type == ANYCAST else 0
            copy = self.annotate(message, extra, dla)
            copy.id = self.next_message_id()
            self._ensure_dead_letter_queue(dla)
            targets = self.route(copy, dla, None)
        refs = [Ref(copy, q) for q in targets] if copy is not None else []
        durable = [r for r in refs if r.durable]
        if durable:
            ops.append(ports.AddMessage(self.message_record(copy)))
            ops.extend(ports.AddReference(r.queue.name, copy.id) for r in durable)
        log.info("dead-lettered message %s from %s (%s) to %s", message.id, queue.name, reason,
                 dla if targets else "nowhere (dropped)")

        def committed(error: BaseException | None) -> None:
            for r in refs:
                r.queue.enqueue(r)
            if done is not None:
                done(error)

        if ops:
            self.journal.submit(ops, committed)
        else:
            committed(None)
        self.queue_idle_check(queue)

    def _ensure_dead_letter_queue(self, name: str) -> None:
        """Hermod creates the dead-letter address with an anycast queue of its name on first
        use (Artemis drops dead letters unless such resources are configured or auto-created)."""
        address = self.addresses.get(name)
        if address is None or not address.queues:
            self.create_queue(name, name, ANYCAST, durable=True, purpose="dead-letter")

    # -- recovery ---------------------------------------------------------------------------------
    def recover(self, recovered: ports.Recovered, make_message: Callable[[ports.MessageRecord], Message]) -> None:
        """Rebuild addresses, queues and messages from the store, in their original order."""
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
                ref = Ref(message, queue, s.delivery_count)
                queue.messages.append(ref)
                queue.added += 1
        self._ids = itertools.count(max(recovered.next_message_id, 1))


class MemoryJournal:
    """The `memory` store: nothing is persisted, every unit completes at once."""

    durable = False

    def recover(self) -> ports.Recovered:
        return ports.Recovered([], [], {}, 1)

    def submit(self, ops, done) -> None:
        if done is not None:
            done(None)

    def read_page(self, queue, after_message_id, limit, done) -> None:
        done([])

    def close(self) -> None:
        pass


__all__ = ["PostOffice", "MemoryJournal", "Consumer", "Queue", "Ref", "MULTICAST", "ANYCAST"]
