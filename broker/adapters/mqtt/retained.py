"""Retained messages: the last message published with the retain flag on each topic, stored
durably, sent to a new subscription whose filter matches it.

They live in one durable last-value queue, `hermod.mqtt.retained` (no consumer ever takes from
it): each retained PUBLISH is stored there as a durable copy carrying its address in the
application property `x-hermod-mqtt-topic`, the queue's last-value key, so a newer one replaces
the older one on the same topic, in memory and in the store, and the store gives them back after
a restart. An empty payload clears the topic: its empty copy replaces the old one and is never
sent (it stays as a small tombstone). On subscribe, the matching ones are put on the
subscription's queue as non-durable copies marked as retained deliveries (retain flag 1), so the
subscription's credit, receive maximum and acknowledgements apply to them like to any message.
"""
from __future__ import annotations

import logging

from ...core.consumer import Ref
from ...core.message import ANYCAST, Message
from ...core.publishing import publish
from ...mapping import mqtt as mapping
from ...mapping.neutral import decode_message, encode_message, envelope_of
from ...mqtt.topics import address_to_topic, topic_matches
from ...mqtt.errors import MqttError

log = logging.getLogger("hermod.mqtt")

RETAINED = "hermod.mqtt.retained"
KEY = "x-hermod-mqtt-topic"
DELIVERY = "x-opt-hermod-mqtt-retained"  # a copy sent on subscribe: retain flag 1


def _queue(po):
    queue = po.queues.get(RETAINED)
    if queue is None:
        po.create_address(RETAINED, {ANYCAST})
        queue = po.create_queue(RETAINED, RETAINED, ANYCAST, durable=True, last_value_key=KEY)
    return queue


def keep(broker, address: str, message: Message, encoded: bytes, clear: bool) -> None:
    """Keep `message` (published with retain to `address`) as the address's retained message,
    as `encoded` (mapping.encode_kept); `clear`: its empty payload clears it."""
    po = broker.postoffice
    queue = _queue(po)
    copy = Message(encoded, envelope_of(encoded), RETAINED, ANYCAST, None, message.arrival)

    def stored(error: BaseException | None) -> None:
        if error is not None:
            log.warning("retained message on %s not stored: %s", address, error)
    publish(po, copy, stored, queue.name)
    if clear:
        log.debug("retained message on %s cleared", address)


def count(po) -> int:
    queue = po.queues.get(RETAINED)
    if queue is None:
        return 0
    return sum(1 for ref in queue.last_values().values() if _has_payload(ref.message))


def _has_payload(message: Message) -> bool:
    """A tombstone (empty payload: the topic was cleared) is not a retained message."""
    return mapping.from_encoded(message.encoded, message.arrival).payload != b""


def send_on_subscribe(po, topic_filter: str, queue, may_consume=None) -> int:
    """Put the retained messages matching `topic_filter` (not shared) on the subscription's
    `queue`; how many. `may_consume(address)`: with permissions, only addresses the subscriber
    may consume from (as a wildcard subscription's bindings)."""
    retained_queue = po.queues.get(RETAINED)
    if retained_queue is None:
        return 0
    now = po.clock.now_ms()
    sent = 0
    for key, ref in list(retained_queue.last_values().items()):
        try:
            topic = address_to_topic(str(key))
        except MqttError:
            continue
        if not topic_matches(topic_filter, topic):
            continue
        if may_consume is not None and not may_consume(str(key)):
            continue
        stored = ref.message
        expiration = stored.expiration
        if expiration and expiration <= now:
            continue
        neutral = decode_message(stored.encoded)
        if neutral.body_kind == "data" and not neutral.body or neutral.body == "":
            continue  # cleared
        neutral.durable = False
        neutral.properties = [p for p in neutral.properties if p[0] != KEY]
        neutral.annotations[DELIVERY] = True
        encoded = encode_message(neutral)
        copy = Message(encoded, envelope_of(encoded), str(key), None, None, stored.arrival, po.next_message_id())
        queue.enqueue(Ref(copy, queue))
        sent += 1
    if sent and queue.consumers:
        po.schedule(queue)
    return sent


__all__ = ["DELIVERY", "KEY", "RETAINED", "count", "keep", "send_on_subscribe"]
