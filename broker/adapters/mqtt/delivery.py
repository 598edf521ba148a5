"""The outbound side of one MQTT connection: messages from the core's queues to the client.

A message goes at the lower of the QoS it was published at and the subscription's. QoS 0 is
acknowledged on the queue as it is written; QoS 1 and 2 wait, under a packet identifier, for
PUBACK (QoS 1) or PUBREC, PUBREL, PUBCOMP (QoS 2) before the queue forgets the message. The
client's receive maximum is the consumers' credit: never more unacknowledged QoS 1 and 2
deliveries than it allows, across every subscription of the connection (a delivery by one
subscription takes a credit from the others). A redelivery (the message was in flight to a
connection that went) carries DUP.

MQTT 5: the remaining message expiry interval, the subscription identifier, topic aliases the
client allows (assigned as topics are first sent, until its maximum), and its maximum packet
size (a message over it is dropped as if delivered, as the specification says).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from ...mapping import mqtt as mapping
from ...mqtt import MQTT_5, Publish, PubRel
from ...mqtt.codec import encode, encode_publish
from ...mqtt.errors import MqttError
from ...mqtt.properties import EMPTY
from ...mqtt.topics import address_to_topic
from .retained import DELIVERY as RETAINED_DELIVERY

if TYPE_CHECKING:
    from .subscriptions import Subscription

log = logging.getLogger("hermod.mqtt")

QOS0_WINDOW = 64  # QoS 0 deliveries a subscription is given at a time (output is bounded too)
SENT, RELEASING = 1, 2  # a QoS 2 delivery's state: PUBLISH sent / PUBREC received, PUBREL sent


class _Last:
    """The last message mapped (a fan-out delivers one message to many subscriptions in a row)."""
    __slots__ = ("message", "outgoing", "topic")

    def __init__(self) -> None:
        self.message: object = None
        self.outgoing: mapping.Outgoing | None = None
        self.topic: str | None = None


_last = _Last()


def outgoing_of(message) -> tuple[str | None, mapping.Outgoing]:
    """(topic or None when the address has no topic name, MQTT form) of a core message."""
    last = _last
    if last.message is message and last.outgoing is not None:
        return last.topic, last.outgoing
    out = mapping.from_encoded(message.encoded, message.arrival)
    try:
        topic: str | None = address_to_topic(message.address)
    except MqttError:
        topic = None
    last.message, last.outgoing, last.topic = message, out, topic
    return topic, out


class Outbox:
    """Deliveries in flight to one connection's client, by packet identifier."""

    def __init__(self, write: Callable[[bytes], None], version: int, receive_maximum: int,
                 maximum_packet_size: int | None, topic_alias_maximum: int, now_ms: Callable[[], int]) -> None:
        self.write = write
        self.version = version
        self.receive_maximum = receive_maximum
        self.maximum_packet_size = maximum_packet_size
        self.topic_alias_maximum = topic_alias_maximum
        self.now_ms = now_ms
        self.in_flight: dict[int, tuple[object, int, int]] = {}  # packet id -> (ref, qos, state)
        self._next_id = 0
        self.aliases: dict[str, int] = {}  # topic -> alias the client knows
        self.subscriptions: list[Subscription] = []  # whose consumers share the window
        self.spent = False  # a QoS 0 delivery took credit since the last refill

    @property
    def quota(self) -> int:
        return self.receive_maximum - len(self.in_flight)

    def _packet_id(self) -> int:
        for _ in range(65535):
            self._next_id = self._next_id % 65535 + 1
            if self._next_id not in self.in_flight:
                return self._next_id
        raise RuntimeError("no free packet identifier")  # receive maximum keeps this from happening

    def deliver(self, sub: Subscription, consumer, ref) -> None:
        """The core gives `ref` to `sub`'s consumer: write its PUBLISH."""
        message = ref.message
        queue = ref.queue
        if sub.dollar_guard and message.address.startswith("$"):
            queue.acknowledge(ref)  # a filter starting with a wildcard never matches `$` topics
            return
        topic, out = outgoing_of(message)
        if topic is None:
            log.warning("message %s on %s: address %r has no MQTT topic name; dropped", message.id, queue.name,
                        message.address)
            queue.acknowledge(ref)
            return
        qos = out.qos if out.qos < sub.qos else sub.qos
        props = out.properties
        new_alias: str | None = None
        if self.version == MQTT_5:
            changes: dict = {}
            if out.expiration:
                left = out.expiration - self.now_ms()
                changes["message_expiry_interval"] = max(0, (left + 999) // 1000)
            if sub.identifier is not None:
                changes["subscription_identifiers"] = (sub.identifier,)
            if self.topic_alias_maximum:
                alias = self.aliases.get(topic)
                if alias is not None:
                    changes["topic_alias"] = alias
                    topic = ""
                elif len(self.aliases) < self.topic_alias_maximum:
                    alias = len(self.aliases) + 1
                    self.aliases[topic] = alias
                    new_alias = topic
                    changes["topic_alias"] = alias
            if changes:
                props = props._replace(**changes)
        else:
            props = EMPTY
        annotations = message.annotations
        retain = bool(annotations.get(RETAINED_DELIVERY)) or (
            sub.retain_as_published and bool(annotations.get(mapping.RETAIN)))
        packet_id = self._packet_id() if qos else None
        data = encode_publish(Publish(topic, out.payload, qos, retain, qos > 0 and ref.delivery_count > 1,
                                      packet_id, props), self.version)
        if self.maximum_packet_size is not None and len(data) > self.maximum_packet_size:
            log.info("message %s: %d bytes over the client's maximum packet size %d; dropped", message.id,
                     len(data), self.maximum_packet_size)
            if new_alias is not None:
                del self.aliases[new_alias]  # the client never learned it
            queue.acknowledge(ref)
            return
        self.write(data)
        if not qos:
            self.spent = True
            queue.acknowledge(ref)
            return
        assert packet_id is not None
        self.in_flight[packet_id] = (ref, qos, SENT)
        for other in self.subscriptions:  # the client's window is the connection's
            c = other.consumer
            if c is not None and c is not consumer and other.qos:
                c.credit -= 1

    # -- the client's answers ------------------------------------------------------------------------
    def puback(self, packet_id: int) -> bool:
        entry = self.in_flight.get(packet_id)
        if entry is None or entry[1] != 1:
            return False
        del self.in_flight[packet_id]
        ref = entry[0]
        ref.queue.acknowledge(ref)  # type: ignore[attr-defined]
        return True

    def pubrec(self, packet_id: int, reason_code: int) -> None:
        entry = self.in_flight.get(packet_id)
        if entry is None or entry[1] != 2:
            self.write(encode(PubRel(packet_id, 0x92 if self.version == MQTT_5 else 0), self.version))
            return
        ref = entry[0]
        if reason_code >= 0x80:  # the client refused it: done with it
            del self.in_flight[packet_id]
            ref.queue.acknowledge(ref)  # type: ignore[attr-defined]
            return
        self.in_flight[packet_id] = (ref, 2, RELEASING)
        self.write(encode(PubRel(packet_id), self.version))

    def pubcomp(self, packet_id: int) -> bool:
        entry = self.in_flight.get(packet_id)
        if entry is None or entry[2] != RELEASING:
            return False
        del self.in_flight[packet_id]
        ref = entry[0]
        if ref is not None:
            ref.queue.acknowledge(ref)  # type: ignore[attr-defined]
        return True

    def refill(self) -> None:
        """Give the subscriptions' consumers the credit the window now allows."""
        quota = self.quota
        for sub in self.subscriptions:
            c = sub.consumer
            if c is None:
                continue
            credit = QOS0_WINDOW if not sub.qos else min(quota, QOS0_WINDOW * 4)
            if credit > c.credit:
                c.credit = credit
                c.queue.host.schedule(c.queue)

    def releasing(self) -> list[int]:
        """The QoS 2 deliveries whose PUBREL was sent (the client has the message)."""
        return [pid for pid, (_, _, state) in self.in_flight.items() if state == RELEASING]

    def resume_releasing(self, packet_ids: list[int]) -> None:
        """A resumed session: the PUBRELs still owed are sent again (their messages never)."""
        for pid in packet_ids:
            self.in_flight[pid] = (None, 2, RELEASING)
            self.write(encode(PubRel(pid), self.version))


__all__ = ["Outbox", "QOS0_WINDOW", "outgoing_of"]
