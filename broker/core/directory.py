"""The post office's directory: creating, finding and deleting addresses and queues (auto-create
and auto-delete included), binding diverts, and persisting what is durable. A mixin of
`PostOffice` (postoffice.py), which owns the state below; routing and committing stay there.
"""
from __future__ import annotations

import logging
from typing import Callable, cast

from . import ports
from .address import Address, QueuePurpose, RoutingType
from .errors import AddressNotFound, QueueNotFound
from .forwarding import Divert
from .lingering import Lingering
from .message import ANYCAST, MULTICAST, Message
from .queue import Queue
from .settings import AddressSettings, SettingsRepository
from .topic_index import BindingIndex
from .wildcards import is_wildcard

log = logging.getLogger("hermod.core")


def _no_local(container_id: str, inner):
    if inner is None:
        return lambda m: m.container_id != container_id
    return lambda m: m.container_id != container_id and inner(m)


class Directory:
    """What the post office knows by name. The attributes are the post office's (set in its
    `__init__`); they are declared here so the type checker sees what this half uses."""

    addresses: dict[str, Address]
    queues: dict[str, Queue]
    journal: ports.Journal
    settings: SettingsRepository
    bound: BindingIndex
    diverts: list[Divert]
    retaining: bool
    creation_guard: Callable[[str, str], None] | None
    may_consume: Callable[[str, str], bool] | None
    compile_filter: Callable[[str], Callable[[Message], bool]] | None
    lingering: Lingering
    retired: dict[str, int]

    def settings_for(self, address: str) -> AddressSettings:
        return self.settings.for_address(address)

    # -- addresses -----------------------------------------------------------------------------
    def create_address(self, name: str, routing_types, *, auto_created: bool = False,
                       temporary: bool = False, persist: bool = True,
                       stored: ports.Done | None = None) -> Address:
        """`stored(error)`, when given, is called once the store has the address (at once when
        there was nothing to store)."""
        address = self.addresses.get(name)
        routing_types = {RoutingType(t).value for t in routing_types}
        if address is None:
            if self.creation_guard is not None and not temporary:
                self.creation_guard("create_address", name)
            address = Address(name, set(routing_types), auto_created=auto_created, temporary=temporary)
            settings = self.settings_for(name)
            address.limit = settings.max_size_bytes
            address.pages = settings.address_full_policy == "page"
            address.retains = settings.retention_days > 0 and self.journal.durable
            self.retaining = self.retaining or address.retains
            self.addresses[name] = address
            if not address.wildcard:
                self.bound.address_created(address)
            if persist and not temporary:
                self._persist_address(address, stored)
                return address
        elif not set(routing_types) <= address.routing_types:
            address.routing_types |= set(routing_types)
            if persist and not temporary:
                self._persist_address(address, stored)
                return address
        if stored is not None:
            stored(None)
        return address

    def _forget_address(self, name: str) -> Address | None:
        address = self.addresses.pop(name, None)
        if address is not None and not address.wildcard:
            self.bound.address_removed(name)
        return address

    def add_divert(self, divert: Divert) -> None:
        """Bind a divert or composite to its source address (or every address its wildcard
        source matches, now and later)."""
        self.diverts.append(divert)
        if not is_wildcard(divert.source) and divert.source not in self.addresses:
            rt = divert.applies_to or self.settings_for(divert.source).default_routing_type
            self.create_address(divert.source, {rt}, persist=False)
        self.bound.bind(divert.source, divert, self.addresses)

    def remove_divert(self, divert: Divert) -> None:
        """Unbind a divert or composite from every address (a configuration reload)."""
        if divert in self.diverts:
            self.diverts.remove(divert)
        self.bound.unbind(divert.source, divert, self.addresses)

    def _admits(self, binding: Queue | Divert, address_name: str) -> bool:
        """Whether a pattern's binding goes to the matching address `address_name`: a wildcard
        subscription only where its owner may consume (the `may_consume` port; contract: the
        others never enter its queue); diverts and queues with no owner always. Asked when
        either side is created, never per message."""
        guard = self.may_consume
        if guard is None or not isinstance(binding, Queue):
            return True
        owner = binding.extra.get("owner")
        return owner is None or guard(owner, address_name)

    def rebind_wildcard_subscriptions(self) -> None:
        """Rights changed (a reload may grant or revoke): every wildcard subscription with an
        owner is bound again to exactly the matching addresses its owner may consume now."""
        for queue in list(self.queues.values()):
            if queue.address.wildcard and queue.routing_type == MULTICAST and "owner" in queue.extra:
                self.bound.rebind(queue.address.name, queue, self.addresses)

    def replace_settings(self, settings: SettingsRepository) -> None:
        """New address settings (a configuration reload): every later lookup reads them, and
        the figures an address keeps from its settings (size limit, paging, retention) follow."""
        self.settings = settings
        for address in self.addresses.values():
            found = settings.for_address(address.name)
            address.limit = found.max_size_bytes
            address.pages = found.address_full_policy == "page"
            address.retains = found.retention_days > 0 and self.journal.durable
            self.retaining = self.retaining or address.retains

    def _persist_address(self, address: Address, stored: ports.Done | None = None) -> None:
        if self.journal.durable:
            self.journal.submit([ports.PutAddress(ports.AddressRecord(
                address.name, frozenset(address.routing_types), address.auto_created))], stored)
        elif stored is not None:
            stored(None)

    def delete_address(self, name: str, stored: ports.Done | None = None) -> None:
        """`stored(error)` as for `create_address` (the store's units complete in order, so the
        address's queues, deleted first, are gone from it by then)."""
        address = self._forget_address(name)
        if address is not None:
            for queue in list(address.queues.values()):
                self.delete_queue(queue.name)
            if self.journal.durable and not address.temporary:
                self.journal.submit([ports.DeleteAddress(name)], stored)
                return
        if stored is not None:
            stored(None)

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
                     purpose: str = QueuePurpose.CONFIGURED, temporary: bool = False,
                     extra: dict | None = None, persist: bool = True) -> Queue:
        existing = self.queues.get(name)
        if existing is not None:
            return existing
        # Held as the plain values: records, management output and the wire see strings.
        routing_type, purpose = RoutingType(routing_type).value, QueuePurpose(purpose).value
        if self.creation_guard is not None and durable and not temporary:
            self.creation_guard("create_durable_queue", address_name)
        address = self.addresses.get(address_name)
        if address is None:
            address = self.create_address(address_name, {routing_type}, auto_created=auto_created,
                                          temporary=temporary, persist=persist)
        elif routing_type not in address.routing_types:
            self.create_address(address_name, {routing_type}, persist=persist)
        if filter is None and filter_text:
            filter = self.compile_filter(filter_text) if self.compile_filter else None
        no_local = (extra or {}).get("no_local")
        if no_local is not None:  # a no-local subscription: not its own connection's messages
            filter = _no_local(no_local, filter)
        host = cast(ports.QueueHost, self)  # the PostOffice this is a part of
        queue = Queue(host, name, address, routing_type, durable=durable, filter=filter,
                      filter_text=filter_text, max_consumers=max_consumers, exclusive=exclusive,
                      last_value_key=last_value_key, auto_created=auto_created, purpose=purpose,
                      temporary=temporary, extra=extra)
        self.queues[name] = queue
        address.bindings.add_queue(queue)
        if address.wildcard and routing_type == MULTICAST:
            # Pay for wildcards at bind time: the queue joins every matching address now, and
            # each matching address created later (`_bind_wildcards`); a send stays a lookup.
            self.bound.bind(address.name, queue, self.addresses)
        if persist and queue.durable and self.journal.durable:
            queue.persisted = False  # attaches that made it are answered once it is stored
            self.journal.submit([ports.PutQueue(queue.record())], queue.stored)
        if queue.selector_aware:
            queue._refresh_selector_filter()
        log.debug("created queue %s on %s (%s)", name, address_name, routing_type)
        return queue

    def persist_queue(self, queue: Queue) -> None:
        """Write a durable queue's attributes again (after they changed)."""
        if queue.durable and self.journal.durable:
            self.journal.submit([ports.PutQueue(queue.record())], None)

    def delete_queue(self, name: str, stored: ports.Done | None = None) -> None:
        """`stored(error)`, when given, is called once the store no longer has the queue (at
        once for a queue it never had): management answers then, as Artemis does once its
        journal has the deletion, so a queue deleted and answered for stays deleted after a
        crash."""
        queue = self.queues.pop(name, None)
        if queue is None:
            if stored is not None:
                stored(None)
            return
        queue.deleted = True
        retired = self.retired
        retired["added"] += queue.added
        retired["acked"] += queue.acked
        retired["delivered"] += queue.delivered
        retired["expired"] += queue.expired
        if queue.lingering:
            self.lingering.cancel(queue)
        queue.address.bindings.remove_queue(queue)
        if queue.address.wildcard and queue.routing_type == MULTICAST:
            self.bound.unbind(queue.address.name, queue, self.addresses)
        for consumer in list(queue.consumers):
            consumer.link.queue_deleted(consumer)
        queue.consumers.clear()
        queue.clear()
        if queue.durable and self.journal.durable:
            self.journal.submit([ports.DeleteQueue(name)], stored)
        elif stored is not None:
            stored(None)
        address = queue.address
        if (not address.in_use and address.auto_created and not address.senders
                and self.settings_for(address.name).auto_delete_addresses
                and self.addresses.get(address.name) is address and not address.temporary):
            self.delete_address(address.name)
        elif address.temporary and not address.in_use:
            self._forget_address(address.name)

    def queue_idle_check(self, queue: Queue) -> None:
        """Auto-created queues go once they have neither consumers nor messages, nor messages
        on their way through the store, nor a sender attached to their address (Artemis keeps
        an auto-created address and its queue while a producer is attached)."""
        if (queue.auto_created and not queue.consumers and queue.idle and not queue.pending
                and not queue.deleted and queue.ever_consumed and not queue.address.senders
                and not queue.lingering
                and self.settings_for(queue.address.name).auto_delete_queues):
            self.delete_queue(queue.name)

    # -- senders ---------------------------------------------------------------------------------
    def sender_attached(self, address: Address) -> None:
        address.senders += 1

    def sender_detached(self, address: Address) -> None:
        """The last sender gone, what it kept may be auto-deleted now."""
        address.senders -= 1
        if address.senders or self.addresses.get(address.name) is not address:
            return
        for queue in list(address.queues.values()):
            self.queue_idle_check(queue)

    def find_queue(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            raise QueueNotFound(f"queue {name} does not exist")
        return queue


__all__ = ["Directory"]
