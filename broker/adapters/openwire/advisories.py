"""Classic's advisory messages for temporary destinations: a DestinationInfo (add or remove)
published on `ActiveMQ.Advisory.TempQueue` / `ActiveMQ.Advisory.TempTopic`, which Classic
clients watch (their AdvisoryConsumer) to know which temporary destinations exist. The topics
are ordinary multicast addresses (permissions apply to consumers as to any other address); the
broker publishes as itself."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ...core import errors
from ...core.message import ANYCAST, MULTICAST, Message
from ...core.publishing import publish
from ...mapping import openwire as mapping
from ...mapping.neutral import envelope_of
from ...openwire import model

if TYPE_CHECKING:
    from .connection import OpenWireConnection

log = logging.getLogger("hermod.openwire")

TEMP_QUEUE_ADVISORY = "ActiveMQ.Advisory.TempQueue"
TEMP_TOPIC_ADVISORY = "ActiveMQ.Advisory.TempTopic"


def temporary_destination(conn: OpenWireConnection, info: model.DestinationInfo,
                          queue: str | None = None) -> None:
    """Publish the advisory for `info` (to every subscriber, or to the subscription `queue`)."""
    topic = TEMP_QUEUE_ADVISORY if isinstance(info.destination, model.TempQueue) else TEMP_TOPIC_ADVISORY
    po = conn.broker.postoffice
    advisory = model.ActiveMQMessage(
        destination=model.Topic(topic), type="Advisory", data_structure=model.DestinationInfo(
            connection_id=info.connection_id, destination=info.destination, operation_type=info.operation_type),
        message_id=model.MessageId(producer_id=model.ProducerId(f"ID:{conn.broker.container_id}-advisory", 1, 1),
                                   producer_sequence_id=po.next_message_id()),
        timestamp=int(time.time() * 1000), properties={"originBrokerName": "hermod"})
    encoded = mapping.encode(advisory, conn.max_message_size)
    try:
        if topic not in po.addresses:
            po.create_address(topic, {MULTICAST}, auto_created=True)
        def done(error: BaseException | None) -> None:
            if error is not None:
                log.info("advisory on %s not published: %s", topic, error)
        publish(po, Message(encoded, envelope_of(encoded), topic, MULTICAST, None, advisory.timestamp), done, queue)
    except errors.HermodError as exc:
        log.info("advisory on %s not published: %s", topic, exc)


def existing(conn: OpenWireConnection, consumers) -> None:
    """A new subscriber of a temporary-destination advisory topic first learns every temporary
    destination that exists (Classic's AdvisoryBroker does so; a client checks a reply-to
    against what it learned before sending to it)."""
    from .connection import OpenWireConnection
    for c in consumers:
        topic = c.queue.address.name
        if topic not in (TEMP_QUEUE_ADVISORY, TEMP_TOPIC_ADVISORY):
            continue
        wanted = ANYCAST if topic == TEMP_QUEUE_ADVISORY else MULTICAST
        for other in list(conn.server.clients):
            if not isinstance(other, OpenWireConnection) or other.closed or other.connection_id is None:
                continue
            for name, rt in list(other.temporary.items()):
                if rt != wanted:
                    continue
                d = model.TempQueue(name) if rt == ANYCAST else model.TempTopic(name)
                temporary_destination(conn, model.DestinationInfo(connection_id=other.connection_id, destination=d,
                                                                  operation_type=0), c.queue.name)


__all__ = ["TEMP_QUEUE_ADVISORY", "TEMP_TOPIC_ADVISORY", "existing", "temporary_destination"]
