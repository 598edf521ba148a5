"""A reload takes rights away from open connections too (contract, "Security"): a user removed
from the configuration (or the anonymous login, once it is no longer allowed) loses its
connections; a link whose right was removed is detached with `amqp:unauthorized-access` while
the connection's other links carry on; and when `[tls] ca` changed, a connection whose client
certificate no longer verifies is closed.

What a link holds is what its attach was allowed (`Authorization.recording` around the attach,
kept per link on its connection by `remember`); each is asked again of `broker.authorization`
with the user's new roles. A link attached while no permission was configured (nothing was
asked) is asked what its handler reads from: its queues' addresses, or its target's.

Both a closed connection and a detached link answer `amqp:unauthorized-access`, naming why.
Revoking a link does not end what it leaves behind: a durable subscription and its messages stay
(closing a link would unsubscribe; this detaches it), in-flight messages go back to their queue.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from cproton_ffi import lib

from ..core.kinds import QueuePurpose
from ..security.auth import ANONYMOUS_USER, Principal
from . import conditions
from .conditions import set_condition

if TYPE_CHECKING:
    from .connection import Connection
    from .server import Server

log = logging.getLogger("hermod.security")

# Rights remembered per link: pruned once there are this many more entries than open links.
_SLACK = 64


def remember(conn: Connection, link, held: list[tuple[str, str]] | None) -> None:
    """What the attach of `link` was allowed (None: nothing was asked, no permissions ran)."""
    rights = conn.link_rights
    rights[link] = tuple(held) if held is not None else None
    if len(rights) > len(conn.links) + _SLACK:  # links gone since: forget them
        for gone in [lk for lk in rights if lk not in conn.links]:
            del rights[gone]


def current_principal(auth, principal: Principal) -> Principal | None:
    """`principal` as the configuration now has it: its new roles, or None when it may no
    longer log in (the user was removed, or the anonymous login is off)."""
    if principal.mechanism == "ANONYMOUS" and principal.name == ANONYMOUS_USER:
        return principal if auth.anonymous else None
    entry = auth.users.get(principal.name)
    if entry is None:
        return None
    roles = entry[1]
    return principal if roles == principal.roles else Principal(principal.name, roles, principal.mechanism)


def revoke(server: Server, certificate_ok: Callable[[Connection], bool] | None = None) -> None:
    """After a reload: close or detach what the new configuration no longer allows.
    `certificate_ok` (when `[tls] ca` is in use) says whether a connection's client certificate
    still verifies."""
    broker = server.broker
    closed = detached = 0
    for conn in list(server.connections):
        if conn.closed or conn.transport is None:
            continue
        if certificate_ok is not None and not certificate_ok(conn):
            _close(conn, "its client certificate no longer verifies against [tls] ca")
            closed += 1
            continue
        principal = conn.principal
        if principal is None:
            continue  # still logging in: the new users and mechanisms apply to it
        now = current_principal(broker.auth, principal)
        if now is None:
            _close(conn, f"user {principal.name} may no longer log in")
            closed += 1
            continue
        conn.principal = now
        for link, handler in list(conn.links.items()):
            for operation, address in _held(conn, link, handler, broker):
                denial = broker.authorization.denial(now, operation, address, via="reload", peer=conn.peer)
                if denial is not None:
                    _detach(conn, handler, denial)
                    detached += 1
                    break
    for client in list(getattr(server, "clients", ())):  # OpenWire, STOMP, MQTT (adapters/)
        principal = client.principal
        if client.closed or principal is None:
            continue
        now = current_principal(broker.auth, principal)
        if now is None:
            client.refuse_and_close(f"user {principal.name} may no longer log in")
            closed += 1
            continue
        client.principal = now
        detached += client.revalidate()
    if closed or detached:
        log.warning("configuration reload: %d connection(s) closed and %d link(s) detached that "
                    "the new configuration no longer allows", closed, detached)
        server.flush()


def _held(conn: Connection, link, handler, broker) -> tuple[tuple[str, str], ...]:
    held = conn.link_rights.get(link)
    if held is not None:
        return held
    return _derived(handler, broker)


def _derived(handler, broker) -> tuple[tuple[str, str], ...]:
    """The rights a link attached with no permission configured goes on using, read from its
    handler: the addresses it consumes from, or the address it sends to."""
    if getattr(handler, "is_producer", False):
        address = handler.target.address
        if address is None:
            return ()  # an anonymous relay: each message is checked as it comes
        return (("manage" if address == broker.management_address else "send", address),)
    out = []
    operation = "browse" if getattr(handler, "browser", False) else "consume"
    for consumer in getattr(handler, "consumers", ()):
        queue = consumer.queue
        if queue.purpose == QueuePurpose.TEMPORARY:
            continue  # a dynamic node is its creator's, not an address's
        # A virtual topic's consumer queue is attached (and checked) by its own name.
        out.append((operation, queue.name if queue.purpose == QueuePurpose.VIRTUAL_TOPIC else queue.address.name))
    return tuple(out)


def _close(conn: Connection, why: str) -> None:
    log.warning("closing connection %s: %s (configuration reload)", conn.peer, why)
    conn.broker.audit("connection_closed", peer=conn.peer,
                      user=conn.principal.name if conn.principal is not None else None, reason=why)
    conn._detach_links(lambda link: True, session_end=True)
    conn._close_with(conditions.UNAUTHORIZED_ACCESS, why)


def _detach(conn: Connection, handler, description: str) -> None:
    """End one link with `amqp:unauthorized-access`. The handler is told the link detached (not
    closed): closing would end a durable subscription, which losing a right must not do."""
    link = handler.link
    log.info("detaching link %s of %s: %s (configuration reload)", handler.name, conn.peer, description)
    set_condition(lib.pn_link_condition(link), conditions.UNAUTHORIZED_ACCESS, description)
    lib.pn_link_close(link)
    conn.links.pop(link, None)
    conn.link_rights.pop(link, None)
    handler.on_detach(closed=False)
    if lib.pn_link_is_receiver(link):
        conn.discard(link)
    conn.server.mark(conn)
