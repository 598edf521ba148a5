"""The inbound QoS 2 state of persistent sessions, stored so that exactly once holds across a
broker restart: the packet identifiers PUBRECed and not yet released by PUBREL, per client id.

One record per client id in the durable last-value queue `hermod.mqtt.qos2` (key: the
application property `x-hermod-mqtt-client`; body: the identifiers as an AMQP list). A QoS 2
PUBLISH and the record that names its identifier are committed in ONE journal unit (a core
transaction), so after a crash either both are stored (the client's resend is answered with
PUBREC and not delivered again) or neither (the resend is published). A PUBREL writes the record
without the identifier before PUBCOMP goes, so the client cannot reuse the identifier while the
store still names it. A clean session keeps this state in memory only.
"""
from __future__ import annotations

import logging
from typing import Callable

from ...core.message import ANYCAST, Message
from ...core.publishing import publish
from ...core.transactions import Transaction
from ...mapping.neutral import VALUE_BODY, NeutralMessage, decode_message, encode_message, envelope_of

log = logging.getLogger("hermod.mqtt")

STATE = "hermod.mqtt.qos2"
KEY = "x-hermod-mqtt-client"
Done = Callable[[BaseException | None], None]


def _queue(po):
    queue = po.queues.get(STATE)
    if queue is None:
        po.create_address(STATE, {ANYCAST})
        queue = po.create_queue(STATE, STATE, ANYCAST, durable=True, last_value_key=KEY)
    return queue


def _record(po, client_id: str, packet_ids: set[int]) -> Message:
    m = NeutralMessage(durable=True, properties=[(KEY, "string", client_id)], body_kind=VALUE_BODY,
                       body=sorted(packet_ids))
    encoded = encode_message(m)
    return Message(encoded, envelope_of(encoded), STATE, ANYCAST, None, po.clock.now_ms())


def transaction(po) -> Transaction:
    """A transaction for one QoS 2 PUBLISH and its record."""
    _queue(po)
    return Transaction(b"mqtt-qos2", None, po)


def add_record(po, txn: Transaction, client_id: str, packet_ids: set[int]) -> None:
    publish(po, _record(po, client_id, packet_ids), _ignore, STATE, txn)


def save(po, client_id: str, packet_ids: set[int], done: Done) -> None:
    """Store the record alone (a PUBREL took an identifier out)."""
    _queue(po)
    publish(po, _record(po, client_id, packet_ids), done, STATE)


def load(po, client_id: str) -> set[int]:
    """The identifiers a restarted broker still owes a PUBCOMP to (empty when none)."""
    queue = po.queues.get(STATE)
    if queue is None:
        return set()
    ref = queue.last_values().get(client_id)
    if ref is None:
        return set()
    try:
        body = decode_message(ref.message.encoded).body
    except Exception:  # noqa: BLE001 - an unreadable record owes nothing
        log.warning("QoS 2 state of MQTT client %s unreadable; dropped", client_id)
        return set()
    return {int(p) for p in body} if isinstance(body, list) else set()


def _ignore(error: BaseException | None) -> None:
    return None


__all__ = ["STATE", "add_record", "load", "save", "transaction"]
