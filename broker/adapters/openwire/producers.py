"""Producers and sends of an OpenWire connection (a mixin of OpenWireConnection): ProducerInfo
checks `send` on its destination; a message is authorized and resolved per part of its
destination (composites), then published through `core.publishing`. A send that asked for an
answer gets it once the message is stored wherever it must be; an asynchronous one under a
producer window gets a ProducerAck then (or when refused), as Classic's broker answers."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ...core.message import ANYCAST, Message
from ...core.publishing import blocked, publish
from ...mapping import openwire as mapping
from ...mapping.neutral import envelope_of
from ...openwire import model
from ...openwire.values import marshal_map
from . import native
from .commands import BLOCKED, LATER
from .destinations import Target, targets
from .errors import TRANSACTION_ROLLED_BACK, Refusal

log = logging.getLogger("hermod.openwire")

MIN_MESSAGE_SIZE = 1024  # Classic's ActiveMQMessage.DEFAULT_MINIMUM_MESSAGE_SIZE (ProducerAck sizes)


class Producer:
    __slots__ = ("info", "window")

    def __init__(self, info: model.ProducerInfo) -> None:
        self.info = info
        self.window = info.window_size


class ProducerCommands:
    """OpenWireConnection's producer half (the attributes are the connection's)."""

    broker: Any
    principal: Any
    peer: str
    client_id: str | None
    connection_id: Any
    producers: dict[Any, Producer]
    temporary: dict[str, str]
    txns: dict[Any, Any]
    max_message_size: int

    if TYPE_CHECKING:
        def answer(self, command, exc: BaseException | None = None) -> None: ...
        def send_command(self, command: model.DataStructure) -> None: ...

    def _on_producer_info(self, info: model.ProducerInfo) -> Any:
        if info.destination is not None:
            for t in targets(info.destination):
                self._resolve(t)
        self.producers[info.producer_id] = Producer(info)
        return None

    def _resolve(self, t: Target) -> tuple[str, str | None, str | None]:
        """Check `send` and find (or auto-create) where a message for `t` goes."""
        broker = self.broker
        if t.temporary and t.address in self.temporary:
            return t.address, t.routing_type, None
        with broker.acting_as(self.principal):
            return broker.relay_target(t.address, t.routing_type, t.queue)

    def _on_message(self, msg: model.Message) -> Any:
        parts = targets(msg.destination)
        po = self.broker.postoffice
        resolved = [self._resolve(t) for t in parts]
        for address, _rt, _q in resolved:
            if blocked(po, address):
                return BLOCKED
        txn = None
        if msg.transaction_id is not None:
            txn = self.txns.get(msg.transaction_id)
            if txn is None:
                raise Refusal(TRANSACTION_ROLLED_BACK, f"unknown transaction {msg.transaction_id}")
        neutral = mapping.to_neutral(msg, self.max_message_size)
        arrival = int(time.time() * 1000)
        pending = [len(resolved)]
        failure: list[BaseException] = []

        def done(error: BaseException | None) -> None:
            if error is not None and not failure:
                failure.append(error)
            pending[0] -= 1
            if pending[0] == 0:
                self._sent(msg, failure[0] if failure else None)

        origin = self.client_id or (self.connection_id.value if self.connection_id else None)
        for (address, rt, queue), part in zip(resolved, parts):
            if len(parts) > 1:
                neutral.to = address
                neutral.annotations[mapping.JMS_DEST] = mapping.dest_kind(rt or ANYCAST, part.temporary)
            encoded = mapping.encode_neutral(neutral)
            message = Message(encoded, envelope_of(encoded), address, rt, origin, arrival)
            message.native = native.keep(msg, len(parts))  # OpenWire consumers: the producer's own fields
            publish(po, message, done, queue, txn)
        return LATER

    def _sent(self, msg: model.Message, error: BaseException | None) -> None:
        if msg.response_required:
            self.answer(msg, error)
            return
        if error is not None:
            log.info("openwire %s: asynchronous send to %s refused: %s", self.peer,
                     msg.destination.physical_name if msg.destination else None, error)
        self._ack_window(msg)

    def _ack_window(self, msg: model.Message) -> None:
        """An asynchronous send under a producer window is answered with a ProducerAck once it
        is done with (stored, or refused): the client's window has room for the next ones."""
        producer = self.producers.get(msg.producer_id) if msg.producer_id is not None else None
        if producer is not None and producer.window > 0:
            self.send_command(model.ProducerAck(producer_id=msg.producer_id, size=message_size(msg)))


def message_size(msg: model.Message) -> int:
    """The size Classic's broker puts in a ProducerAck (ActiveMQMessage.getSize on the broker)."""
    size = MIN_MESSAGE_SIZE + len(msg.content or b"")
    if msg.properties:
        size += len(marshal_map(msg.properties))
    return size


__all__ = ["MIN_MESSAGE_SIZE", "Producer", "ProducerCommands", "message_size"]
