"""Sends across cluster nodes ([ha] mode = "cluster"; docs/scale-out.md section 3, option 2).

A message routed on this node to a queue another live node owns is not stored here (this node
could not commit a reference to that queue: the ownership fence refuses it); it is sent to the
owner over an internal outgoing AMQP link, to the queue's fully qualified name
(`address::queue`), and the producer is settled `accepted` only once this node's own part is
stored (queues it owns, retention, duplicate ids) AND every owner settled its copy `accepted`,
which the owner does after its own commit. Any other outcome, or an owner that cannot be
reached, refuses the send (`amqp:internal-error`): it is never accepted stored only in part.
A copy an owner accepted for a send that is refused anyway (another part failed) stays there.

Duplicate-id stamp (docs/scale-out.md section 5): every copy carries `_AMQ_DUPL_ID` =
`ORIGIN@QUEUE`, ORIGIN being the producer's own `_AMQ_DUPL_ID` when it set one, else this
process's holder and the message id (`node token/id`), QUEUE the target queue (an owner's
duplicate cache is per address, so copies for two of its queues must differ). The owner's
duplicate detection then drops a second copy of one message for one queue: a producer's resend
(with its id) after a refused send whose copy an owner had accepted, or any resend of a copy
with the same message id. The rest of the message is forwarded byte for byte.

One `PeerLink` (connection + sender link) per owner and target queue, made on first use and
kept while it works; a link that goes down fails what it had in flight and is made again by
the next send. Sends wait for the owner's credit in a bounded line (WINDOW).

Security: a link logs in with `[ha] cluster_user` (SASL PLAIN, the password from the variable
`cluster_password_env` names) or, without it, ANONYMOUS; the owner checks that user's `send`
permission on the queue's address like any producer's. An owner announced as amqps:// is
reached over TLS verified as a [[bridge]] verifies its remote: against `[tls] ca` when set,
else the system's CAs, and the announce host must match the certificate.
"""
from __future__ import annotations

import logging
import os
import ssl
from collections import deque
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from .bridge import client_context
from .core.duplicates import DUPLICATE_ID, DuplicateIds
from .protocol import outgoing
from .protocol.amqptypes import decode, encode, skip
from .protocol.codec import APPLICATION_PROPERTIES, sections

log = logging.getLogger("hermod.cluster")

WINDOW = 10_000  # sends waiting for one peer link's credit; more are refused at once

Done = Callable[[BaseException | None], None]


class ForwardFailed(Exception):
    """A copy for another node was not accepted there (mapped to amqp:internal-error)."""


def stamp(message, origin: str, queue: str) -> str:
    """The `_AMQ_DUPL_ID` of `message`'s copy for `queue` (see the module docstring)."""
    own = DuplicateIds.id_of(message)
    return f"{own if own is not None else f'{origin}/{message.id}'}@{queue}"


def stamped(encoded: bytes, value: str) -> bytes:
    """`encoded` with the application property `_AMQ_DUPL_ID` = `value` (replacing one the
    message had); every other section and property keeps its exact bytes."""
    entry = encode(DUPLICATE_ID) + encode(value)
    out, placed = [], False
    for descriptor, start, end in sections(encoded):
        if descriptor == APPLICATION_PROPERTIES:
            out.append(_map_section(_entries_without(encoded, start, DUPLICATE_ID) + [entry]))
            placed = True
            continue
        if descriptor > APPLICATION_PROPERTIES and not placed:  # the body or the footer
            out.append(_map_section([entry]))
            placed = True
        out.append(encoded[start:end])
    if not placed:
        out.append(_map_section([entry]))
    return b"".join(out)


def _entries_without(encoded: bytes, start: int, key: str) -> list[bytes]:
    """The encoded key+value entries of the map section at `start`, but `key`'s."""
    p = start + 3 if encoded[start + 1] == 0x53 else skip(encoded, start + 1)
    code = encoded[p]
    if code == 0xC1:
        count, p = encoded[p + 2], p + 3
    elif code == 0xD1:
        count, p = int.from_bytes(encoded[p + 5:p + 9], "big"), p + 9
    else:  # null: no properties
        return []
    entries = []
    for _ in range(count // 2):
        value_at = skip(encoded, p)
        end = skip(encoded, value_at)
        if decode(encoded, p)[0] != key:
            entries.append(encoded[p:end])
        p = end
    return entries


def _map_section(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return (b"\x00\x53" + bytes((APPLICATION_PROPERTIES, 0xD1)) + (len(body) + 4).to_bytes(4, "big")
            + (2 * len(entries)).to_bytes(4, "big") + body)


class LoginError(ValueError):
    """The cluster login cannot be made from the configuration (a one-line start-up error)."""


@dataclass(frozen=True)
class PeerLogin:
    """How this node logs in to the others: a user and password, or None for ANONYMOUS."""
    user: str | None = None
    password: str | None = None


def peer_login(ha, environ=os.environ) -> PeerLogin:
    """The [ha] cluster login; the password is read now, so a missing variable stops the start."""
    if ha.cluster_user is None:
        return PeerLogin()
    password = environ.get(ha.cluster_password_env)
    if password is None:
        raise LoginError(f"ha.cluster_password_env: environment variable {ha.cluster_password_env} "
                         "is not set")
    return PeerLogin(ha.cluster_user, password)


class PeerLink:
    """One outgoing link to `target` on the node at `announce` (the owner of outgoing.py's
    callbacks)."""

    def __init__(self, forwarder: "Forwarder", announce: str, target: str) -> None:
        self.forwarder = forwarder
        self.announce, self.target = announce, target
        self.waiting: deque[tuple[bytes, Done]] = deque()
        self.inflight: set[int] = set()
        self._dones: dict[int, Done] = {}
        self._tokens = 0
        parts = urlsplit(announce)
        broker = forwarder.broker
        tls = parts.scheme == "amqps"
        login = forwarder.login
        self.connection = outgoing.OutgoingConnection(
            forwarder.loop, self, parts.hostname or "localhost", parts.port or (5671 if tls else 5672),
            ssl_context=forwarder.tls_context() if tls else None,
            user=login.user, password=login.password,
            container_id=f"{broker.container_id}-cluster",
            link_name=f"hermod-cluster-{forwarder.node}-{target}", source=f"$cluster.{forwarder.node}",
            target=target, idle_timeout_s=broker.config.server.idle_timeout_s)
        self.connection.start()

    def send(self, data: bytes, done: Done) -> None:
        if len(self.waiting) >= WINDOW:
            done(ForwardFailed(f"too many sends waiting for {self.announce}"))
            return
        self.waiting.append((data, done))
        self._flush()

    def _flush(self) -> None:
        while self.waiting and self.connection.credit > 0:
            data, done = self.waiting.popleft()
            self._tokens += 1
            self._dones[self._tokens] = done
            self.connection.send(data, self._tokens)

    # -- outgoing.OutgoingConnection's callbacks ---------------------------------------------------
    def link_up(self) -> None:
        self.forwarder.up(self)
        self._flush()

    def credit_changed(self) -> None:
        self._flush()

    def outcome(self, token: int, kind: str, failed: bool, undeliverable: bool,
                condition: tuple[str, str] | None = None) -> None:
        done = self._dones.pop(token, None)
        if done is not None:
            why = f" ({': '.join(part for part in condition if part)})" if condition else ""
            done(None if kind == outgoing.ACCEPTED else
                 ForwardFailed(f"the owner at {self.announce} answered {kind}{why} for {self.target}"))

    def down(self, reason: str) -> None:
        self.forwarder.forget(self, reason)
        error = ForwardFailed(f"the owner of {self.target} at {self.announce}: {reason}")
        dones = list(self._dones.values()) + [done for _, done in self.waiting]
        self._dones.clear()
        self.waiting.clear()
        for done in dones:
            done(error)

    def close(self) -> None:
        self.connection.close()


class Forwarder:
    """The post office's `core.ports.RemoteQueues` in cluster mode: `PostOffice.post` splits
    every plan into this node's part and the owners' parts and hands each of these here (see
    the module docstring)."""

    def __init__(self, broker, loop, node: str, owner_of: Callable[[str], tuple | None],
                 login: PeerLogin = PeerLogin(), origin: str | None = None) -> None:
        self.broker, self.loop, self.node = broker, loop, node
        self.origin = origin or node  # this process (Membership.holder): the stamp's origin
        self.login = login
        self._owner_of = owner_of  # queue -> (node, announce) or None: Cluster.owner_of
        self._links: dict[tuple[str, str], PeerLink] = {}
        self._tls: ssl.SSLContext | None = None
        self._down_reasons: dict[str, str] = {}  # announce -> the last reason logged

    def tls_context(self) -> ssl.SSLContext:
        """For owners announced as amqps://, made once ([tls] ca, as a bridge's)."""
        if self._tls is None:
            tls = self.broker.config.tls
            try:
                self._tls = client_context(tls)
            except (OSError, ssl.SSLError) as e:
                raise ForwardFailed(f"tls.ca: cannot load {tls.ca}: {e}") from None
        return self._tls

    # -- core.ports.RemoteQueues: the post office forwards through these ------------------------

    def elsewhere(self, queue) -> bool:
        """Another node owns `queue` (only durable queues have owners: temporary ones are
        local). An owner that has not announced where it listens yet counts: the send is
        refused rather than accepted here."""
        return queue.durable and self._owner_of(queue.name) is not None

    def forward(self, message, queue, done: Done) -> None:
        """`message`'s copy for `queue`, to the queue's owner by its fully qualified name."""
        owner = self._owner_of(queue.name) if queue.durable else None
        if owner is None:  # it changed hands since the plan was split (a re-read of the owners)
            done(ForwardFailed(f"the owner of queue {queue.name} changed while the message was "
                               "routed; send it again"))
            return
        if not owner[1]:
            done(ForwardFailed(f"queue {queue.name} is owned by cluster node {owner[0]}, which has "
                               "not announced where it listens yet"))
            return
        try:
            link = self._link(owner[1], f"{queue.address.name}::{queue.name}")
        except ForwardFailed as error:
            done(error)
            return
        link.send(stamped(message.encoded, stamp(message, self.origin, queue.name)), done)

    def _link(self, announce: str, target: str) -> PeerLink:
        key = (announce, target)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = PeerLink(self, announce, target)
        return link

    def up(self, link: PeerLink) -> None:
        """A link to `link.announce` works again: its next failure is logged."""
        self._down_reasons.pop(link.announce, None)

    def forget(self, link: PeerLink, reason: str) -> None:
        """`link` is down: the next send makes another. Logged when the reason for its node
        changes (a refused login would otherwise log once per send)."""
        if self._links.get((link.announce, link.target)) is link:
            del self._links[(link.announce, link.target)]
        if self._down_reasons.get(link.announce) != reason:
            if len(self._down_reasons) >= 1000:
                self._down_reasons.clear()
            self._down_reasons[link.announce] = reason
            log.warning("cluster node %s: link to %s for %s is down: %s", self.node,
                        link.announce, link.target, reason)

    def close(self) -> None:
        for link in list(self._links.values()):
            link.close()
        self._links.clear()
