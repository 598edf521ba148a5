"""The one authorization decision: (principal, operation, address) -> allowed, or a denial.

Every way in asks here and nowhere else: attach by name, prefix, FQQN, composite parts, each
message on an anonymous relay, virtual-topic consumer queues, each message routed into a
wildcard subscription, link recovery, durable-subscription replace, AMQP and HTTP management,
the console, cluster forwarding, bridges and the other protocols' adapters. A caller names the
operation and the address it touches; this module says yes or no, and on no writes the log
line and the audit record and builds the refusal (`core.errors.NotAuthorized`, which every
adapter maps to its own wire form: `amqp:unauthorized-access`, a JMSSecurityException, a STOMP
ERROR, MQTT 0x87).

Ownership is decided here too: a durable subscription, a lingering subscription, a temporary
queue and link-recovery state belong to the user who made them, and another user's attach
under the same container id and link name gets none of it (`may_take_over`).

`Permissions` holds the rule (the most specific `[[security.permission]]` entry decides, alone);
this module applies it to principals and reports. A reload swaps the `Permissions` object.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from ..core import errors
from .auth import Principal
from .permissions import Permissions

log = logging.getLogger("hermod.security")

NOBODY = Principal("(not logged in)", frozenset())
EVERYTHING = ("#", ">")  # the `match` of an entry that speaks for the whole broker
# The rights a link goes on using after its attach (a reload that takes one away ends the link);
# creating an address or a queue, or deleting one, is done once at the attach and is not held.
HELD = frozenset(("send", "consume", "browse", "manage"))


def _no_audit(event: str, **fields) -> None:
    """Stands in when no audit log is configured."""


class Authorization:
    """The decision point. `permissions` may be replaced (a reload); nothing else is state."""

    def __init__(self, permissions: Permissions, audit: Callable[..., None] = _no_audit,
                 cluster_user: str | None = None):
        self.permissions = permissions
        self.audit = audit
        self._held: list[tuple[str, str]] | None = None  # `recording`'s list while one runs
        # Cluster mode: the login other nodes forward with ([ha] cluster_user; None: ANONYMOUS
        # forwards, which vouch for nobody).
        self.cluster_user = cluster_user

    @property
    def enabled(self) -> bool:
        """Whether any `[[security.permission]]` exists (none: everybody may do everything)."""
        return self.permissions.enabled

    # -- the decision -----------------------------------------------------------------------------
    def allows(self, principal: Principal | None, operation: str, address: str) -> bool:
        """The decision alone, silent: for filtering (lists, wildcard deliveries per message)."""
        if not self.permissions.enabled:
            return True
        who = principal or NOBODY
        return self.permissions.allows(who.roles, operation, address)

    def require(self, principal: Principal | None, operation: str, address: str, *,
                via: str = "amqp", **details) -> None:
        """Raise NotAuthorized naming the operation and the address, with a log line and an
        audit record, unless `principal` may do `operation` on `address`."""
        if self.allows(principal, operation, address):
            if self._held is not None and operation in HELD:
                self._held.append((operation, address))
            return
        self._refuse(principal, operation, address, via, details)

    def _refuse(self, principal: Principal | None, operation: str, address: str, via: str,
                details: dict) -> None:
        """The log line, the audit record and the refusal, naming the operation and address."""
        who = principal or NOBODY
        log.warning("denied: user %s may not %s on address %s (%s)", who.name, operation, address, via)
        self.audit("denied", user=who.name, operation=operation, address=address, via=via, **details)
        raise errors.NotAuthorized(f"user {who.name} is not allowed to {operation} on address {address}")

    def denial(self, principal: Principal | None, operation: str, address: str, *,
               via: str = "amqp", **details) -> str | None:
        """`require` as a value: None when allowed, else the refusal's description."""
        try:
            self.require(principal, operation, address, via=via, **details)
        except errors.NotAuthorized as e:
            return str(e)
        return None

    @contextmanager
    def recording(self) -> Iterator[list[tuple[str, str]]]:
        """The (operation, address) rights `require` granted inside, of those in HELD: what an
        attach was allowed on, so that a reload can ask again for each open link with the new
        permissions (protocol/revocation.py). Everything runs on the loop thread, and an attach
        is decided before it waits for anything, so one list at a time is enough."""
        outer, self._held = self._held, []
        try:
            yield self._held
        finally:
            self._held = outer

    # -- broker-wide rights -------------------------------------------------------------------------
    def broker_wide(self, principal: Principal | None, operation: str) -> bool:
        """Broker-wide reads (`browse`) and writes (`manage`: closing a connection) need the right
        from an entry whose `match` is `#` (or `>`): a grant on some addresses is not enough."""
        if not self.permissions.enabled:
            return True
        who = principal or NOBODY
        return self.permissions.grants_on_everything(who.roles, operation)

    def require_broker_wide(self, principal: Principal | None, operation: str, *, via: str = "amqp",
                            **details) -> None:
        """`broker_wide` as a refusal (log line, audit record, NotAuthorized naming the `#`
        entry the right must come from)."""
        if not self.broker_wide(principal, operation):
            self._refuse(principal, operation, EVERYTHING[0], via, details)

    def require_management_door(self, principal: Principal | None, address: str, *,
                                via: str = "amqp", **details) -> None:
        """The management endpoint itself (attaching to, or relaying to, `hermod.management`):
        open to whoever some entry grants `manage` or `browse`, since management then checks
        every operation on the address it touches; a user with neither could do nothing there,
        and is refused as before (`manage` on the endpoint's address)."""
        if self.grants_anywhere(principal, "manage") or self.grants_anywhere(principal, "browse"):
            return
        self._refuse(principal, "manage", address, via, details)

    def grants_anywhere(self, principal: Principal | None, operation: str) -> bool:
        """Some entry grants `operation` to the principal: enough to be let into the HTTP API,
        whose every operation is then checked on its own address."""
        if not self.permissions.enabled:
            return True
        who = principal or NOBODY
        return self.permissions.grants_anywhere(who.roles, operation)

    def view(self, principal: Principal | None) -> Callable[[str], bool] | None:
        """Which addresses lists and `explain` show the principal: None (all of them) with no
        permissions configured, else those it may `browse`."""
        if not self.permissions.enabled:
            return None
        return lambda address: self.allows(principal, "browse", address)

    def forwarded_by_peer(self, principal: Principal | None) -> bool:
        """Whether `principal` is another cluster node forwarding a message. Such a message was
        decided on its entry node, as its original sender (its `send` right there, its
        user-id under `validate_user_id`); the owner does not decide again as the cluster user,
        whose rights are the node's, not the sender's: it checks only that user's own `send`
        at attach, like any producer's. Only a login as the cluster user vouches (its password,
        or a verified certificate naming it), never an ANONYMOUS one: with `cluster_user =
        "anonymous"` every anonymous client would otherwise be the user `anonymous` too, and
        could set any user-id (issue 28). A trust of the peer: see docs/security.md."""
        return (self.cluster_user is not None and principal is not None
                and principal.name == self.cluster_user and principal.mechanism != "ANONYMOUS")

    # -- ownership ------------------------------------------------------------------------------------
    @staticmethod
    def may_take_over(principal: Principal | str | None, owner: str | None) -> bool:
        """Whether `principal` (or the user of that name: the core knows users by name) may
        resume state another attach left under the same container id and link name (a durable
        or lingering subscription, a temporary queue, recovery state): only its owner may;
        state with no recorded owner (made before owners were kept) is open to whoever resumes
        it. It holds with or without `[[security.permission]]`: users differ either way."""
        if owner is None:
            return True
        name = principal if isinstance(principal, str) or principal is None else principal.name
        return name == owner
