"""The JMS-over-AMQP mapping's destination annotations, as the qpid-jms client reads them.

qpid-jms learns whether a message's `to` and `reply-to` name a queue, a topic or a temporary
one from the byte annotations `x-opt-jms-dest` and `x-opt-jms-reply-to` (0 queue, 1 topic,
2 temporary queue, 3 temporary topic); without them it guesses from the destination it
consumes from, which is wrong for a reply-to of the other kind, a wildcard or an FQQN. JMS
senders set both themselves; messages from other clients lack them. So a consumer link of a
JMS client (open property `product` = `QpidJMS`) gets them added on delivery where missing,
from the address the message was routed to and the address its reply-to names. What a sender
set is never changed; other clients get the message as it was sent (no per-delivery cost).
"""
from __future__ import annotations

from cproton_ffi import lib
from .binding import dat2obj

from ..core import errors
from ..core.message import MULTICAST
from .amqptypes import Byte
from .terminus import parse_name

JMS_DEST = "x-opt-jms-dest"
JMS_REPLY_TO = "x-opt-jms-reply-to"
QUEUE, TOPIC, TEMPORARY_QUEUE, TEMPORARY_TOPIC = (Byte(0), Byte(1), Byte(2), Byte(3))
JMS_PRODUCTS = ("QpidJMS",)
REPLY_TO_FIELD = 4  # properties: message-id, user-id, to, subject, reply-to


def is_jms_client(pn_connection) -> bool:
    """Did the peer's open say it is the qpid-jms client (its `product` property)?"""
    props = dat2obj(lib.pn_connection_remote_properties(pn_connection))
    return isinstance(props, dict) and props.get("product") in JMS_PRODUCTS


def destination_annotations(message, postoffice, prefixes: tuple[tuple[str, ...], tuple[str, ...]]) -> dict | None:
    """The mapping's annotations `message` lacks, or None."""
    annotations = message.annotations
    extra = {}
    if JMS_DEST not in annotations:
        kind = _kind(postoffice.addresses.get(message.address), message.routing_type)
        if kind is not None:
            extra[JMS_DEST] = kind
    if JMS_REPLY_TO not in annotations and message.envelope.properties_count > REPLY_TO_FIELD:
        reply_to = message.reply_to
        if isinstance(reply_to, str) and reply_to:
            try:
                name = parse_name(reply_to, [], *prefixes)
            except errors.HermodError:  # a name over the limits names nothing here
                name = None
            if name is not None:
                kind = _kind(postoffice.addresses.get(name.address), name.routing_type)
                if kind is not None:
                    extra[JMS_REPLY_TO] = kind
    return extra or None


def _kind(address, routing_type: str | None):
    """Queue, topic or their temporary forms: the routing type the message (or name) says,
    else the address's when it has only multicast; unknown addresses say nothing."""
    if address is None:
        return None if routing_type is None else (TOPIC if routing_type == MULTICAST else QUEUE)
    topic = routing_type == MULTICAST if routing_type else address.routing_types == {MULTICAST}
    if address.temporary:
        return TEMPORARY_TOPIC if topic else TEMPORARY_QUEUE
    return TOPIC if topic else QUEUE
