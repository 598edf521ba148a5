"""One SUBSCRIBE: the core's `link` for the consumer (or consumers: one per part of a composite
destination) it made. The queue calls `send(consumer, ref)` while the consumer has credit; the
credit is the subscription's window (`activemq.prefetchSize`, else DEFAULT_PREFETCH) less the
messages it holds unacknowledged. `ack: auto` acknowledges a message as it is written (so the
window only bounds one dispatch turn; the socket's write buffer bounds the rest);
`client` and `client-individual` keep it until ACK (cumulative for `client`) or NACK."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...core import links as core_links
from ...mapping.neutral import TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND, TOPIC_KIND
from ...stomp import encode_frame
from .destinations import stomp_name
from .message_frames import message_frame

if TYPE_CHECKING:
    from ...core.consumer import Consumer, Ref
    from .connection import StompConnection

log = logging.getLogger("hermod.stomp")

AUTO, CLIENT, INDIVIDUAL = "auto", "client", "client-individual"
ACK_MODES = (AUTO, CLIENT, INDIVIDUAL)
DEFAULT_PREFETCH = 1000  # ActiveMQ Classic's default queue prefetch
MAX_PREFETCH = 100_000


class Pending:
    """A message written to the client and not yet acknowledged."""

    __slots__ = ("key", "sub", "ref", "consumer", "seq")

    def __init__(self, key: str, sub: Subscription, ref: Ref, consumer: Consumer, seq: int) -> None:
        self.key, self.sub, self.ref, self.consumer, self.seq = key, sub, ref, consumer, seq


class Subscription:
    def __init__(self, conn: StompConnection, sid: str, destination: str, ack: str, window: int,
                 browser: bool = False, durable_queue: str | None = None) -> None:
        self.conn = conn
        self.id = sid
        self.destination = destination
        self.ack = ack
        self.window = window
        self.browser = browser
        self.durable_queue = durable_queue  # CLIENTID.NAME of a durable subscription
        self.consumers: list[Consumer] = []
        self.unacked: dict[int, Pending] = {}  # by seq, in delivery order
        self.browse_ended = False
        self.held: tuple[tuple[str, str], ...] = ()  # (operation, address) rights its SUBSCRIBE was granted
        self._refill_due = False
        self.active = True

    # -- the core's link interface ---------------------------------------------------------------
    def send(self, consumer: Consumer, ref: Ref) -> None:
        conn = self.conn
        message = ref.message
        name = stomp_name(conn, message.address, consumer.queue.routing_type)
        redelivered = ref.delivery_count > 1 or ref.returned
        explicit = not self.browser and self.ack != AUTO
        data, key = message_frame(conn, message, name, redelivered, self.id, self._reply_name,
                                  conn.subscriptions.ack_key if explicit else None)
        conn.write(data)
        if self.browser:
            self._credit_back()
            if not consumer.snapshot:
                self.end_browse()
        elif self.ack == AUTO:
            consumer.queue.acknowledge(ref)
            self._credit_back()
        else:
            assert key is not None
            seq = conn.subscriptions.track(key, self, ref, consumer)
            self.unacked[seq] = conn.subscriptions.pending_by_seq[seq]

    def queue_deleted(self, consumer: Consumer) -> None:
        """The queue went away (management deleted it): this subscription ends with an ERROR."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if not self.consumers and self.active:
            self.active = False
            self.conn.subscriptions.forget(self)
            self.conn.fail_later(f"queue {consumer.queue.name} was deleted")

    # -- credit ------------------------------------------------------------------------------------
    def _credit_back(self) -> None:
        """Auto acknowledgement and browsing: top the window up once this turn's writing is done."""
        if not self._refill_due:
            self._refill_due = True
            self.conn.server.loop.call_soon(self.refill)

    def refill(self) -> None:
        self._refill_due = False
        if not self.active:
            return
        credit = max(0, self.window - len(self.unacked))
        for c in self.consumers:
            if c.credit < credit:
                c.credit = credit
                c.queue.host.schedule(c.queue)
        if self.browser and not self.browse_ended and all(not c.snapshot for c in self.consumers):
            self.end_browse()

    def set_blocked(self, blocked: bool) -> None:
        for c in self.consumers:
            c.blocked = blocked
            if not blocked:
                c.queue.host.schedule(c.queue)

    def end_browse(self) -> None:
        """ActiveMQ Classic's end of a browse: an empty MESSAGE with `browser: end`."""
        if self.browse_ended:
            return
        self.browse_ended = True
        conn = self.conn
        conn.write(encode_frame("MESSAGE", [("subscription", self.id), ("message-id", ""),
                                            ("destination", self.destination), ("browser", "end")],
                                b"", conn.version))

    # -- the reply-to of a MESSAGE ---------------------------------------------------------------------
    def _reply_name(self, address: str, kind: int) -> str:
        if kind in (TEMPORARY_QUEUE_KIND, TEMPORARY_TOPIC_KIND):
            own = self.conn.temporaries.stomp_name(address)
            if own is not None:
                return own
        if kind in (TOPIC_KIND, TEMPORARY_TOPIC_KIND):
            return "/topic/" + address
        if kind >= 0:
            return "/queue/" + address
        return address

    # -- the end ---------------------------------------------------------------------------------------
    def close(self, *, unsubscribe: bool = False, attempted: bool = False) -> None:
        """Detach: unacknowledged messages go back to their queues (counted as an attempt when
        the connection failed); a durable subscription ends only with `unsubscribe`."""
        self.active = False
        po = self.conn.broker.postoffice
        for c in self.consumers:
            try:
                core_links.detach_consumer(po, c, unsubscribe=unsubscribe, attempted=attempted)
            except Exception:  # noqa: BLE001 - the others must still go
                log.exception("detaching STOMP subscription %s", self.id)
        self.consumers = []
        self.unacked.clear()
