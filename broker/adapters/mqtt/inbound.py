"""One MQTT message into the address model: a client's PUBLISH or a will.

The topic is the multicast address it maps to (`plant/line1/temp` -> `plant.line1.temp`);
`send` (and `create_address` when the address would be auto-created) is checked through the
one decision point inside `Broker.acting_as`, then `core.publishing.publish` routes and
stores it; `done(None)` once it may be acknowledged. A retained message is also kept as the
topic's retained message (retained.py), which an empty payload clears.
"""
from __future__ import annotations

from typing import Callable

from ...core.message import MULTICAST, Message
from ...core.publishing import publish
from ...core.transactions import Transaction
from ...mapping import mqtt as mapping
from ...mapping.neutral import envelope_of
from ...mqtt.properties import Properties
from ...mqtt.topics import topic_to_address
from . import retained

Done = Callable[[BaseException | None], None]


def publish_message(broker, principal, client_id: str | None, topic: str, payload: bytes, qos: int,
                    retain: bool, properties: Properties, done: Done, txn: Transaction | None = None) -> str:
    """Publish (inside `txn` when given: held for its commit); raises the core's refusal
    (NotAuthorized, ...) before anything is routed. Returns the address."""
    address = topic_to_address(topic)
    with broker.acting_as(principal):
        address, rt, queue = broker.relay_target(address, MULTICAST, None)
    po = broker.postoffice
    now = po.clock.now_ms()
    encoded = mapping.encode_publish(payload, qos, properties, now, retain)
    message = Message(encoded, envelope_of(encoded), address, rt, client_id, now)
    if retain:
        kept = mapping.encode_kept(payload, qos, properties, now, retained.KEY, address)
        retained.keep(broker, address, message, kept, payload == b"")
    publish(po, message, done, queue, txn)
    return address


__all__ = ["publish_message"]
