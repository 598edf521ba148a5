"""The Broker: one object that holds the configuration, the post office, the store and the
management service, and answers the protocol adapter's questions (attach, relay, selectors).
"""
from __future__ import annotations

import logging
import socket
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from .config import Config
from .core import errors, links as core_links, transactions as core_transactions
from .core.message import ANYCAST, MULTICAST, Message, SharedBodyCopy
from .core.postoffice import MemoryJournal, PostOffice
from .core.selectable import COUNTED, CountingSelector, message_lookup
from .core.settings import SettingsRepository
from .selector import SelectorError, compile_selector
from .spool import FileSpool
from .core.virtual_topics import find as find_virtual_topic
from . import routing
from .management import Management
from .security.audit import AuditLog, no_audit
from .security.auth import ANONYMOUS, Authenticator, Principal
from .security.authorization import NOBODY, Authorization
from .security.permissions import Permissions
from .security.throttle import LoginFailed, LoginThrottle
from .protocol import codec, codec_edits
from .protocol.management_codec import ManagementCodec
from .protocol.transformers import load_transformer

log = logging.getLogger("hermod")

MANAGEMENT_ADDRESS = "hermod.management"
RECOVERY_WINDOW = 10_000  # messages per queue read at start; deeper queues page the rest in
RECOVERY_MEMORY_SHARE = 0.5  # of the memory limit, for all the messages recovery reads


_DROP = ("x-opt-routing-type",)  # a copy takes the routing type its target gives it


def _annotate(message: Message, extra: dict, address: str, clear_expiry: bool = False) -> Message:
    """A copy of `message` with message annotations added, addressed to `address` (the codec
    rewrites only the annotations section, and the expiry fields when asked; the rest stays
    byte for byte, and is shared with the original unless the expiry fields change)."""
    drop = _DROP
    envelope = message.envelope
    if clear_expiry and (envelope.ttl or envelope.properties_count > 8):
        encoded, envelope = codec_edits.annotated_copy(message.encoded, envelope, extra, drop=drop, clear_expiry=True)
        return Message(encoded, envelope, address, None, message.container_id, message.arrival)
    front, base, bare_at = message.parts()
    head, envelope = codec_edits.annotated_head(front, envelope, extra, drop)
    return SharedBodyCopy(head, base, bare_at, envelope, address, message.container_id, message.arrival)


def _copy_heads(front: bytes, envelope, extra: dict, key: str):
    """`PostOffice`'s `copy_heads`: the heads of copies that differ only in annotation `key`,
    made as `_annotate` makes a copy's (`codec_edits.CopyHeads`)."""
    return codec_edits.CopyHeads(front, envelope, extra, key, _DROP).head


def address_settings(config: Config, virtual_topics) -> SettingsRepository:
    """The `[[address_settings]]` entries. Virtual topics are topics: a send to one with no
    routing type is multicast; listed first, so any user entry at least as specific overrides."""
    vt_settings = [(vt.name, {"default_routing_type": MULTICAST}) for vt in virtual_topics]
    return SettingsRepository(vt_settings + list(config.address_settings))


class Broker:
    def __init__(self, config: Config, journal=None, defer: Callable | None = None,
                 call_at: Callable | None = None):
        self.config = config
        self.container_id = f"hermod-{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.journal = journal or MemoryJournal()
        self.virtual_topics = routing.virtual_topics(config)
        self.postoffice = PostOffice(
            address_settings(config, self.virtual_topics), self.journal, defer=defer,
            annotate=_annotate, copy_heads=_copy_heads, compile_filter=self.compile_filter, call_at=call_at,
            spool=FileSpool())
        self.management_address = MANAGEMENT_ADDRESS
        self.management = Management(self, ManagementCodec())
        if config.server.max_memory_mb is not None:  # before recovery, which reads within it
            self.postoffice.flow.memory_limit = config.server.max_memory_mb * 1024 * 1024
        self.auth = Authenticator(config.security)
        self.logins = LoginThrottle(self.auth)  # every password check, AMQP and HTTP alike
        permissions = Permissions(config.security.get("permissions", ()))
        self.diverts: list = []  # the configured diverts and composites, as installed
        self.acting: Principal | None = None  # whose attach or send is being handled
        audit_path = config.security.get("audit_log")
        self.audit = AuditLog(Path(audit_path)) if audit_path else no_audit
        # The one decision point (security/authorization.py): every way in asks it.
        self.authorization = Authorization(
            permissions, self.audit, config.ha.cluster_user if config.ha.mode == "cluster" else None)
        # The core asks it through two ports: who may resume a subscription, a temporary queue
        # (by its recorded owner), and where a wildcard subscription is bound.
        self.postoffice.may_take_over = self.authorization.may_take_over
        self.postoffice.may_consume = self.owner_may_consume
        self.validate_user_id = config.security.get("validate_user_id", False)
        self.bridges: list = []  # [[bridge]]s, started by the run loop (bridge.start_bridges)
        self.cluster = None  # [ha] mode = "cluster": the joined broker.cluster.Cluster
        self.forwarder = None  # and its broker.cluster_forward.Forwarder (sends to other nodes)
        # Prepared (XA) transaction branches by their stored id, broker-wide: they outlive the
        # connection that prepared them, and the store's outlive a restart (`start`).
        self.prepared: dict[bytes, core_transactions.Transaction] = {}

    @property
    def permissions(self) -> Permissions:
        return self.authorization.permissions

    @permissions.setter
    def permissions(self, permissions: Permissions) -> None:
        """A reload (users already adopted): the new rights apply to later decisions, and the
        wildcard subscriptions are bound again to the addresses their owners may now consume."""
        self.authorization.permissions = permissions
        self.postoffice.rebind_wildcard_subscriptions()

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Recover what the store holds, then create the configured addresses and queues."""
        window = RECOVERY_WINDOW if self.journal.durable else None
        # However many queues, what recovery reads stays within a share of the memory limit.
        budget = int(self.postoffice.flow.memory_limit * RECOVERY_MEMORY_SHARE)
        # A cluster node reads the messages of the queues it owns only (broker/cluster.py).
        only = {} if self.cluster is None else {"queues": self.cluster.owned}
        recovered = (self.journal.recover(window=window, max_bytes=budget, **only) if window
                     else self.journal.recover(**only))
        self.postoffice.recover(recovered, self.message_from_record, window)
        for branch in recovered.prepared:
            self.prepared[branch.xid] = core_transactions.restore(self.postoffice, branch)
        if self.cluster is not None:  # ids from blocks of the shared counter, not max(id) + 1
            self.postoffice.take_ids_from(self.cluster.ids)
        self.create_configured(self.config)
        self.diverts = routing.install(self.postoffice, self.config, self.build_diverts(self.config))

    def build_diverts(self, config: Config) -> list:
        """`config`'s diverts and composites as core diverts, transformers loaded (raises
        RoutingConfigError); a reload builds them before it changes anything."""
        return routing.diverts(config, self.compile_filter, load_transformer)

    def create_configured(self, config: Config) -> None:
        """The `[[address]]` entries and their queues; ones that exist already are kept as
        they are (start after recovery, and a configuration reload)."""
        po = self.postoffice
        for a in config.addresses:
            po.create_address(a.name, set(a.routing))
            for q in a.queues:
                if q.routing not in a.routing:
                    po.create_address(a.name, {q.routing})
                po.create_queue(q.name, a.name, q.routing, durable=q.durable, filter_text=q.filter,
                                max_consumers=q.max_consumers, exclusive=q.exclusive,
                                last_value_key=q.last_value_key or None)

    @staticmethod
    def message_from_record(record) -> Message:
        envelope = codec.Envelope(record.encoded)
        return Message(record.encoded, envelope, record.address, record.routing_type,
                       None, record.arrival, record.id)

    # -- selectors ------------------------------------------------------------------------------
    @staticmethod
    def _selector(text: str):
        try:
            return compile_selector(text)
        except SelectorError as e:
            raise errors.InvalidFilter(f"Invalid filter: {e}") from None

    def compile_filter(self, text: str):
        """A selector as a predicate over a Message (raises InvalidFilter)."""
        matches = self._selector(text).matches
        return lambda message: matches(message_lookup(message))

    def compile_consumer_selector(self, text: str):
        """A consumer's selector: a predicate over a Message, or, when it names JMSRedelivered
        or JMSXDeliveryCount, a CountingSelector the queue gives the ref's delivery count."""
        selector = self._selector(text)
        if not selector.identifiers.isdisjoint(COUNTED):
            return CountingSelector(selector.matches)
        matches = selector.matches
        return lambda message: matches(message_lookup(message))

    # -- permissions -----------------------------------------------------------------------------
    @contextmanager
    def acting_as(self, principal: Principal | None):
        """Attaches and sends handled inside are `principal`'s: checked, and any address or
        durable queue they would create too."""
        if not self.permissions.enabled:
            yield
            return
        previous, self.acting = self.acting, principal or NOBODY
        self.postoffice.creation_guard = self.authorize
        try:
            yield
        finally:
            self.acting = previous
            if previous is None:
                self.postoffice.creation_guard = None

    def principal_named(self, name: str) -> Principal:
        """The user `name` as the security layer knows it now (a reload may change roles): a
        configured user, the anonymous login, or, for a user no longer configured, no roles."""
        found = self.auth.principal(name, "")
        if found is not None:
            return found
        return ANONYMOUS if name == ANONYMOUS.name else Principal(name, frozenset())

    def owner_may_consume(self, owner: str, address: str) -> bool:
        """The core's `may_consume` port: may a wildcard subscription's owner receive what is
        sent to `address`? Asked when the subscription is bound there, never per message."""
        authorization = self.authorization
        return not authorization.enabled or authorization.allows(self.principal_named(owner), "consume", address)

    async def authorize_http(self, user: str | None, password: str | None, permission: str,
                             host: str = "?") -> Principal | None:
        """HTTP Basic for the management API, metrics and console: the user must log in and
        hold `permission` (`manage`; for reads `browse` or `manage`) on some address. The API
        is broker-wide, so a grant on any address admits (`Authorization.grants_anywhere`);
        each operation is then checked on its own address by `Management.call`, and what lists
        and `explain` show is narrowed by `Authorization.view`. The logged-in principal, or None (a known user without the right);
        raises LoginFailed for missing or wrong credentials. The password check runs through
        the login throttle (`host`: the client's address): off the loop, failures delayed."""
        if user is None or password is None:
            raise LoginFailed(None)  # no guess was made: nothing to slow down
        principal = await self.logins.check_plain(host, user, password)
        if principal is None:
            log.warning("HTTP login failed for user %s from %s", user, host)
            self.audit("login_failed", user=user, peer=host, via="http")
            raise LoginFailed(user)
        wanted = ("browse", "manage") if permission == "browse" else (permission,)
        if any(self.authorization.grants_anywhere(principal, p) for p in wanted):
            return principal
        log.warning("denied: user %s may not %s over HTTP", user, permission)
        self.audit("denied", user=user, operation=permission, via="http")
        return None

    def authorize(self, operation: str, address: str, principal: Principal | None = None) -> None:
        """Raise NotAuthorized (amqp:unauthorized-access) naming the operation and the address,
        with a log line, unless the principal's roles allow it."""
        self.authorization.require(principal or self.acting or NOBODY, operation, address)

    def _authorize_send(self, address: str) -> None:
        """`send` on `address` for the acting principal; the management endpoint instead admits
        whoever may manage or browse somewhere (management checks each operation's address)."""
        if address == self.management_address:
            self.authorization.require_management_door(self.acting or NOBODY, address)
        else:
            self.authorize("send", address)

    def subscription_delete_denial(self, principal: Principal | None, queue) -> str | None:
        """Closing a durable subscription deletes its queue: `delete_queue` on its address."""
        try:
            self.authorize("delete_queue", queue.address.name, principal)
        except errors.NotAuthorized as e:
            return str(e)
        return None

    # -- links ---------------------------------------------------------------------------------
    def attach_producer(self, req: core_links.ProducerRequest) -> core_links.ProducerTarget:
        if self.acting is not None and req.address is not None and not req.dynamic:
            self._authorize_send(req.address)
        if req.address == self.management_address:
            return core_links.ProducerTarget(req.address, ANYCAST, ANYCAST)
        return core_links.attach_producer(self.postoffice, req)

    def attach_consumer(self, req: core_links.ConsumerRequest, link, owner=None):
        found = None if req.dynamic or req.queue is not None else find_virtual_topic(self.virtual_topics, req.address)
        if self.acting is not None and not req.dynamic:
            # `browse` is enough only for an attach that takes nothing: `copy` on a queue (or a
            # virtual topic's consumer queue, browsed as asked); `copy` on a subscription is
            # consumed, so it needs `consume` like any other reader. A virtual topic's consumer
            # queue lives on the topic's address: that is the address the attach touches.
            browsing = req.browser and (found is not None or core_links.browses(self.postoffice, req))
            self.authorize("browse" if browsing else "consume", req.address if found is None else found[1])
        if self.cluster is not None and not req.dynamic:  # another node's queue: go there
            self.cluster.check_consumer(req.address, req.routing_type, req.queue,
                                        req.subscription_queue)
        if found is not None:
            vt, topic = found
            return core_links.attach_virtual_topic_consumer(self.postoffice, vt, topic, req, link, owner)
        return core_links.attach_consumer(self.postoffice, req, link, owner)

    def relay_target(self, address: str, rt: str | None, queue: str | None) -> tuple[str, str | None, str | None]:
        """Where an anonymous-relay message goes, its `to` already parsed by the protocol adapter
        (`rt` from the link, the message's annotations or the prefix of `to`, in that order; None:
        the address's own types); `queue` from a fully qualified `to`."""
        if self.acting is not None:
            self._authorize_send(address)
        if address == self.management_address:
            return address, ANYCAST, None
        if queue is not None:
            if queue not in self.postoffice.queues:
                raise errors.QueueNotFound(f"queue {address}::{queue} does not exist")
            return address, rt, queue
        found = self.postoffice.resolve_send_routing_type(address, rt)
        self.postoffice.ensure_send_target(address, found)
        return address, rt if rt is not None else found, None

    def close(self) -> None:
        if self.forwarder is not None:
            self.forwarder.close()
        for bridge in self.bridges:  # before the store: their acknowledgements are finished by it
            bridge.stop()
        if self.audit is not no_audit:
            self.audit.close()
        self.logins.close()
        self.journal.close()
        self.postoffice.spool.close()


__all__ = ["Broker", "MANAGEMENT_ADDRESS", "MULTICAST"]
