"""An OpenWire consumer: the `link` the core's queues dispatch to, its prefetch as credit, and
the client's MessageAcks applied to what it was sent.

Credit is the prefetch less the messages sent and not yet acknowledged; a DELIVERED (or
REDELIVERED) ack extends the window by the messages it names without acknowledging them, as
Classic's prefetch extension does, so a transacted or client-acknowledging consumer keeps
receiving. At prefetch 0 credit comes only from MessagePull: one message per pull; a pull that
finds nothing in its timeout is answered with an empty MessageDispatch.

Acks name messages by their MessageId; the broker's message id travels in its
`broker_sequence_id`, so an ack finds its refs in O(1) (a range ack walks the sent messages in
order, as Classic's does).
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from ...core import links as core_links
from ...core.message import MULTICAST, Message
from ...mapping.neutral import decode_message, encode_message, envelope_of
from ...protocol.amqptypes import DecodeError
from ...mapping import openwire as mapping
from ...openwire import model
from .destinations import destination_for

if TYPE_CHECKING:
    from ...core.queue import Consumer
    from .connection import OpenWireConnection

log = logging.getLogger("hermod.openwire")

DELIVERED, POISON, STANDARD, REDELIVERED, INDIVIDUAL, UNMATCHED, EXPIRED = range(7)
POISON_CAUSE = "dlqDeliveryFailureCause"
UNKNOWN, NONE_DELIVERED = -2, -1  # RemoveInfo.lastDeliveredSequenceId: Classic's markers
#: (queue, message id) given back by a clean close after the client's application had it: the
#: next delivery says redelivered though no attempt was counted. Bounded (oldest forgotten).
RETURNED: OrderedDict[tuple[str, int], bool] = OrderedDict()
MAX_RETURNED = 100_000


def remember_returned(queue: str, message_id: int) -> None:
    RETURNED[(queue, message_id)] = True
    if len(RETURNED) > MAX_RETURNED:
        RETURNED.popitem(last=False)


class OpenWireConsumer:
    """One ConsumerInfo: one core consumer per part of its destination."""

    def __init__(self, conn: OpenWireConnection, info: model.ConsumerInfo) -> None:
        self.conn = conn
        self.info = info
        self.id = info.consumer_id
        self.prefetch = max(0, info.prefetch_size)
        self.browser = info.browser
        self.consumers: list[Consumer] = []
        self.sent: OrderedDict[int, Any] = OrderedDict()  # message id -> Ref, unacknowledged
        self.extended: set[int] = set()  # sent ids a DELIVERED ack took out of the window
        self.pulls = 0  # prefetch 0: MessagePulls not yet answered
        self.pull_timer: asyncio.TimerHandle | None = None
        self.browse_ended = False
        self.subscription: str | None = None  # the durable subscription's queue

    # -- the core's link --------------------------------------------------------------------------
    def send(self, consumer: Consumer, ref) -> None:
        message = ref.message
        count = 0 if consumer.browser else max(0, ref.delivery_count - 1)
        if RETURNED and RETURNED.pop((consumer.queue.name, message.id), False) and not consumer.browser:
            count = max(count, 1)  # given back by a clean close after the client had it: redelivered
        native = message.native
        if native is not None:  # sent by an OpenWire producer: its own fields, marshalled once
            marshaller = self.conn.codec.marshaller
            try:
                out = native.premarshalled(marshaller, message, count) if marshaller.tight else \
                    native.message(message, count)
            except Exception:  # noqa: BLE001 - mapped from the stored form below instead
                log.exception("message %s: the producer's form cannot be given again", message.id)
            else:
                self._dispatched(consumer, ref, out, count)
                return
        try:
            msg = mapping.from_stored(message.encoded, message.id, count)
        except Exception as exc:  # noqa: BLE001 - one undecodable message must not stop the queue
            log.warning("message %s on %s cannot be given to an OpenWire consumer: %s", message.id,
                        consumer.queue.name, exc)
            if not consumer.browser:
                consumer.queue.reject(ref)
            return
        if msg.destination is None:
            msg.destination = destination_for(message.address, message.routing_type or consumer.queue.routing_type)
        msg.arrival = message.arrival
        msg.broker_in_time = message.arrival
        self._dispatched(consumer, ref, msg, count)

    def _dispatched(self, consumer: Consumer, ref, msg: Any, count: int) -> None:
        """Send `msg` (a model.Message, or its engine.Premarshalled form) and count it sent."""
        message = ref.message
        self.conn.send_command(model.MessageDispatch(
            consumer_id=self.id, destination=self.info.destination, message=msg, redelivery_counter=count))
        if consumer.browser:
            self.conn.loop.call_soon(self.end_browse)
        else:
            self.sent[message.id] = ref
            if self.pulls:
                self.pulls -= 1
        if len(self.consumers) > 1:  # the parts of a composite share the window
            for other in self.consumers:
                if other is not consumer and other.credit > 0:
                    other.credit -= 1
        if not self.conn.writable:
            consumer.blocked = True

    def queue_deleted(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.conn.send_command(model.ConsumerControl(consumer_id=self.id, close=True,
                                                     destination=self.info.destination))

    # -- credit ---------------------------------------------------------------------------------------
    def window(self) -> int:
        if self.browser:
            return self.prefetch or 1
        if self.prefetch == 0:
            return self.pulls
        return max(0, self.prefetch - (len(self.sent) - len(self.extended)))

    def refill(self) -> None:
        credit = self.window()
        for c in self.consumers:
            if c.credit != credit:
                grew = credit > c.credit
                c.credit = credit
                if grew:
                    c.queue.host.schedule(c.queue)

    def set_blocked(self, blocked: bool) -> None:
        for c in self.consumers:
            if c.blocked != blocked:
                c.blocked = blocked
                if not blocked:
                    c.queue.host.schedule(c.queue)

    def end_browse(self) -> None:
        """A browser has seen the queue as it was when it attached: the empty dispatch tells the
        client so (QueueBrowser.hasMoreElements() turns false)."""
        if self.browse_ended or self.conn.closed:
            return
        if all(not c.snapshot for c in self.consumers):
            self.browse_ended = True
            self.conn.send_command(model.MessageDispatch(consumer_id=self.id, destination=self.info.destination))

    # -- MessagePull --------------------------------------------------------------------------------
    def pull(self, timeout: int) -> None:
        """Prefetch 0: one more message may come; none within `timeout` ms (-1: none waiting
        now; 0: no limit) is answered by an empty dispatch."""
        if self.prefetch:
            return
        self.pulls += 1
        self.refill()
        if timeout == 0:
            return
        if self.pull_timer is not None:
            self.pull_timer.cancel()
        delay = 0.02 if timeout < 0 else timeout / 1000
        self.pull_timer = self.conn.loop.call_later(delay, self._pull_expired)

    def _pull_expired(self) -> None:
        self.pull_timer = None
        if self.pulls and not self.conn.closed:
            self.pulls = 0
            self.refill()
            self.conn.send_command(model.MessageDispatch(consumer_id=self.id, destination=self.info.destination))

    # -- acks ------------------------------------------------------------------------------------------
    def _range(self, ack: model.MessageAck) -> list[int]:
        """The sent message ids an ack names, in order: from its first (or the oldest sent) to
        its last."""
        last = ack.last_message_id.broker_sequence_id if ack.last_message_id is not None else None
        if last is None or last not in self.sent:
            return []
        first = ack.first_message_id.broker_sequence_id if ack.first_message_id is not None else None
        out: list[int] = []
        started = first is None or first not in self.sent
        for mid in self.sent:
            if not started and mid == first:
                started = True
            if started:
                out.append(mid)
            if mid == last:
                break
        return out

    def acknowledge(self, ack: model.MessageAck, txn) -> None:
        kind = ack.ack_type
        if kind in (DELIVERED, REDELIVERED):
            for mid in self._range(ack):
                self.extended.add(mid)
            self.refill()
            return
        if kind == INDIVIDUAL:
            one = ack.last_message_id.broker_sequence_id if ack.last_message_id is not None else None
            ids = [one] if one is not None and one in self.sent else []
        else:
            ids = self._range(ack)
        if self.browser:
            self.refill()
            return
        if txn is not None and kind in (STANDARD, INDIVIDUAL):
            for mid in ids:
                ref = self.sent[mid]
                txn.acquire(ref, (self, mid), settled=False)
            self.refill()
            return
        for mid in ids:
            ref = self.sent.pop(mid)
            self.extended.discard(mid)
            queue = ref.queue
            if ref.consumer is None or queue.deleted:
                continue
            if kind == POISON:
                version = poisoned(ref.message, ack.poison_cause)
                self.conn.store_outcome(_rejecter(ref, version), ref)
            else:
                self.conn.store_outcome(_acknowledger(ref), ref)
        self.refill()

    def committed(self, mid: int) -> None:
        """A message this consumer acknowledged in a transaction was committed."""
        self.sent.pop(mid, None)
        self.extended.discard(mid)

    # -- close ----------------------------------------------------------------------------------------
    def close(self, *, failed: bool, last_delivered: int = UNKNOWN) -> None:
        """Give back what was sent and not acknowledged (counted as an attempt when the
        connection failed) and detach; a non-durable subscription or temporary queue goes.
        After a clean close, the messages the client had handed to its application (ids up to
        `last_delivered`, its RemoveInfo's; unknown: all) come again marked redelivered, as
        Classic does, without counting an attempt."""
        if not failed and last_delivered != NONE_DELIVERED:
            for mid, ref in self.sent.items():
                if last_delivered == UNKNOWN or mid <= last_delivered:
                    remember_returned(ref.queue.name, mid)
        if self.pull_timer is not None:
            self.pull_timer.cancel()
            self.pull_timer = None
        po = self.conn.broker.postoffice
        consumers, self.consumers = self.consumers, []
        for c in consumers:
            try:
                core_links.detach_consumer(po, c, attempted=failed)
            except Exception:  # noqa: BLE001 - one queue's fault must not keep the others
                log.exception("detaching OpenWire consumer from %s failed", c.queue.name)
        self.sent.clear()
        self.extended.clear()

    def describe(self) -> dict:
        return {"role": "consumer", "name": str(self.id.value if self.id else "?"),
                "address": self.info.destination.physical_name if self.info.destination else None,
                "queues": [c.queue.name for c in self.consumers],
                "routing_type": MULTICAST if isinstance(self.info.destination, model.Topic) else "anycast",
                "unacknowledged": len(self.sent)}


def _acknowledger(ref: Any) -> Callable[[Any], None]:
    return lambda done: ref.queue.acknowledge(ref, done)


def _rejecter(ref: Any, version: Message | None) -> Callable[[Any], None]:
    return lambda done: ref.queue.reject(ref, done, version=version)


def poisoned(message: Message, cause: model.Throwable | None) -> Message | None:
    """The message as Classic dead-letters a poison-acked one: with the client's reason in the
    property `dlqDeliveryFailureCause` (None: it cannot be read, dead-letter it as it is)."""
    text = "poison ack"
    if cause is not None:
        text = f"{cause.class_name}: {cause.message}" if cause.message else (cause.class_name or text)
    try:
        n = decode_message(message.encoded)
    except DecodeError:
        return None
    n.properties = [p for p in n.properties if p[0] != POISON_CAUSE] + [(POISON_CAUSE, "string", text)]
    encoded = encode_message(n)
    return Message(encoded, envelope_of(encoded), message.address, message.routing_type, message.container_id,
                   message.arrival)


__all__ = ["OpenWireConsumer", "POISON_CAUSE", "poisoned"]
