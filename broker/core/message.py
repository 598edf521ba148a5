"""The message as the broker holds it: the encoded bytes a producer sent, plus the few fields
routing needs. Properties and application properties are decoded only when something asks for
them (a selector, a message group, anonymous relay) and then kept.

The core knows no codec: the protocol adapter hands in an `envelope` that has read the header
and found the sections, and that decodes the rest on demand (duck-typed: `durable`, `priority`,
`ttl`, `annotations`, `properties_of(encoded)`, `application_properties_of(encoded)`).
"""
from __future__ import annotations

import logging

from .kinds import RoutingType

log = logging.getLogger("hermod.core")


ANYCAST = RoutingType.ANYCAST
MULTICAST = RoutingType.MULTICAST


class Message:
    __slots__ = ("id", "encoded", "envelope", "address", "routing_type", "container_id", "arrival",
                 "_properties", "_application_properties", "_expiration", "_scheduled", "hops", "native")

    def __init__(self, encoded: bytes, envelope, address: str, routing_type: str | None = None,
                 container_id: str | None = None, arrival: int = 0, message_id: int = 0):
        self.id = message_id
        self.encoded = encoded
        self.envelope = envelope
        self.address = address  # the address it was routed to (never the encoded `to`)
        self.routing_type = routing_type
        self.container_id = container_id  # the producer's container id (no-local filters)
        self.arrival = arrival
        self._properties: dict | None = None
        self._application_properties: dict | None = None
        self._expiration: int | None = None
        self._scheduled: int | None = None
        self.hops = 0  # times forwarded by diverts/composites (cycle guard)
        # The producing protocol adapter's own decoded form of this very version, kept in memory
        # only (never stored: None after a restart, in a copy or a changed version) so that a
        # consumer of the same protocol is not given a re-mapping of `encoded` (OpenWire).
        self.native: object = None

    # -- header ------------------------------------------------------------------------------
    @property
    def durable(self) -> bool:
        return self.envelope.durable

    @property
    def priority(self) -> int:
        p = self.envelope.priority
        return 9 if p > 9 else p

    @property
    def size(self) -> int:
        return len(self.encoded)

    @property
    def annotations(self) -> dict:
        return self.envelope.annotations or {}

    # -- properties, decoded on first use ----------------------------------------------------------
    # A section that cannot be read (the envelope decodes and type-checks it: fields of the
    # wrong AMQP type are left out) reads as empty, once; the message passes on as sent.
    @property
    def properties(self) -> dict:
        if self._properties is None:
            try:
                self._properties = self.envelope.properties_of(self.encoded)
            except Exception:  # noqa: BLE001 - unreadable reads as absent (contract)
                log.exception("message %s: properties unreadable, read as absent", self.id)
                self._properties = {}
        return self._properties

    @property
    def application_properties(self) -> dict:
        if self._application_properties is None:
            try:
                self._application_properties = self.envelope.application_properties_of(self.encoded)
            except Exception:  # noqa: BLE001 - as above
                log.exception("message %s: application properties unreadable, read as absent", self.id)
                self._application_properties = {}
        return self._application_properties

    @property
    def message_id(self):
        return self.properties.get("message_id")

    @property
    def correlation_id(self):
        return self.properties.get("correlation_id")

    @property
    def user_id(self):
        return self.properties.get("user_id")

    @property
    def subject(self):
        return self.properties.get("subject")

    @property
    def to(self):
        return self.properties.get("to")

    @property
    def reply_to(self):
        return self.properties.get("reply_to")

    @property
    def creation_time(self):
        return self.properties.get("creation_time")

    @property
    def group_id(self):
        if self.envelope.properties_count <= 10:  # group-id is field 10: not present
            return None
        return self.properties.get("group_id")

    @property
    def group_sequence(self):
        if self.envelope.properties_count <= 11:
            return None
        return self.properties.get("group_sequence")

    @property
    def expiration(self) -> int:
        """Epoch ms after which the message must not be delivered; 0 = never.
        `absolute-expiry-time` wins over `ttl` (counted from arrival)."""
        if self._expiration is None:
            # absolute-expiry-time is property field 8: skip the decode when it cannot be there.
            absolute = self.properties.get("absolute_expiry_time") or 0 if self.envelope.properties_count > 8 else 0
            if absolute:
                self._expiration = int(absolute)
            elif self.envelope.ttl:
                self._expiration = self.arrival + self.envelope.ttl
            else:
                self._expiration = 0
        return self._expiration

    @property
    def scheduled_time(self) -> int:
        """Epoch ms before which the message must not be delivered (0 = now): the annotation
        `x-opt-delivery-time` wins over `x-opt-delivery-delay` (counted from arrival)."""
        if self._scheduled is None:
            when = 0
            annotations = self.envelope.annotations
            if annotations:
                at = annotations.get("x-opt-delivery-time")
                delay = annotations.get("x-opt-delivery-delay")
                if isinstance(at, int) and at > 0:
                    when = int(at)
                elif isinstance(delay, int) and delay > 0:
                    when = self.arrival + int(delay)
            self._scheduled = when
        return self._scheduled

    def parts(self) -> tuple[bytes, bytes, int]:
        """(front, base, bare_at): the message is `front` up to `bare_at` (its header and
        annotations), then `base[bare_at:]` (the bare message); a copy shares `base`."""
        encoded = self.encoded
        return encoded, encoded, self.envelope.bare_at

    def __repr__(self) -> str:
        return f"<Message {self.id} to {self.address!r} {self.size} bytes>"


class SharedBodyCopy(Message):
    """A copy that differs from its original only before the bare message: its own `head`
    (header and message annotations), the original's bytes shared from `bare_at` on. The
    encoded copy is joined only when something reads `encoded` (a send, the store), and not
    kept, so ten divert copies of a 1 MiB message hold one body, not ten.

    A divert copy made this way costs no body-sized allocation or copy while it waits, so its
    cost does not grow with the body: with 10 diverts, 34-36 -> 7 µs of CPU per copy of a
    64 KiB message, the same ~6.6-7 µs as before at 1 KiB (benchmarks/divert_copies.py).
    """

    __slots__ = ("head", "base", "bare_at", "size")

    def __init__(self, head: bytes, base: bytes, bare_at: int, envelope, address: str,
                 container_id: str | None = None, arrival: int = 0, routing_type: str | None = None,
                 message_id: int = 0, hops: int = 0, scheduled: int | None = None,
                 expiration: int | None = None):
        # Message.__init__'s fields, set here rather than through super() and the `encoded`
        # setter: 0.34 -> 0.17 µs a copy (timeit). A field added to Message goes here too.
        # A divert copy passes what it takes from its original (`copies.divert_copy`) rather
        # than setting it after; `size` is kept, not summed at each enqueue and acknowledgement.
        self.id = message_id
        self.head = head
        self.base = base
        self.bare_at = bare_at
        # `size` is this class's slot, which shadows Message's computed property.
        self.size = len(head) + len(base) - bare_at  # type: ignore[misc]
        self.envelope = envelope
        self.address = address
        self.routing_type = routing_type
        self.container_id = container_id
        self.arrival = arrival
        self._properties = self._application_properties = None
        self._expiration = expiration
        self._scheduled = scheduled
        self.hops = hops
        self.native = None

    @property
    def encoded(self) -> bytes:
        # Two copies of a small body (slice, concatenation) cost less than the view a join
        # needs to make one: 241 -> 139 ns for 1 KiB (timeit); from ~16 KiB on the join wins.
        base, bare_at = self.base, self.bare_at
        if len(base) - bare_at <= 8192:
            return self.head + base[bare_at:]
        return b"".join((self.head, memoryview(base)[bare_at:]))

    @encoded.setter
    def encoded(self, value: bytes) -> None:  # a whole message: nothing shared any more
        self.head, self.base, self.bare_at = value, b"", 0
        self.size = len(value)  # type: ignore[misc]  # the slot (see __init__)

    def parts(self) -> tuple[bytes, bytes, int]:
        return self.head, self.base, self.bare_at
