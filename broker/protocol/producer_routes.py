"""The routes of a producer link that has no single target: an anonymous relay (each message's
`to` names where it goes) and a client-side composite target (a copy to each part), with the
user-id check that relays and direct sends share. A mixin of `ProducerLink` (producer.py),
kept apart because none of it is on the plain send's path."""
from __future__ import annotations

import time

from cproton_ffi import lib

from ..core import errors
from ..core.message import ANYCAST, MULTICAST, Message
from . import conditions, coordinator
from .terminus import parse_name

ROUTING_TYPE_ANNOTATION = "x-opt-routing-type"
JMS_DEST_ANNOTATION = "x-opt-jms-dest"
_JMS_DEST_TYPES = {0: ANYCAST, 2: ANYCAST, 1: MULTICAST, 3: MULTICAST}


def routing_type_annotation(annotations: dict | None) -> str | None:
    if annotations:
        value = annotations.get(ROUTING_TYPE_ANNOTATION)
        if value == 0:
            return MULTICAST
        if value == 1:
            return ANYCAST
    return None


class ProducerRoutes:
    """Relay and composite routing, on a ProducerLink's state (its slots are ProducerLink's)."""

    __slots__ = ()

    def _relay_destination(self, d, data: bytes, envelope, presettled: bool, txn, rt):
        """Anonymous relay: (address, routing type, queue) from the message's `to` (its routing
        type from the link, the message's annotations, or the prefix of `to`, in that order);
        None (and the transfer refused) when there is no `to` or it may not be sent to."""
        to = envelope.properties_of(data).get("to")
        if not to:
            self._reject(d, presettled, txn, conditions.FAILED, "message has no 'to' address")
            return None
        annotations = envelope.annotations
        if rt is None and annotations:
            rt = routing_type_annotation(annotations) or _JMS_DEST_TYPES.get(annotations.get(JMS_DEST_ANNOTATION))
        server = self.broker.config.server  # the prefix of `to` when nothing else says
        try:
            name = parse_name(to, [], server.anycast_prefixes, server.multicast_prefixes)
            if self.broker.permissions.enabled:  # `send` per message on a relay link
                with self.broker.acting_as(self.conn.principal):
                    return self.broker.relay_target(name.address, rt or name.routing_type, name.queue)
            return self.broker.relay_target(name.address, rt or name.routing_type, name.queue)
        except errors.NotAuthorized as e:
            self._reject(d, presettled, txn, conditions.UNAUTHORIZED_ACCESS, str(e))
        except errors.HermodError as e:
            self._reject(d, presettled, txn, conditions.relay_condition(e), str(e))
        return None

    def _user_id_valid(self, data: bytes, envelope) -> bool:
        """`[security] validate_user_id`: a message's user-id, when set, must name the user
        who logged in (AMQP 1.0 3.2.4; Artemis validates it the same way)."""
        user_id = envelope.properties_of(data).get("user_id")
        if user_id is None:
            return True
        if isinstance(user_id, (bytes, bytearray, memoryview)):
            user_id = bytes(user_id).decode("utf-8", "replace")
        principal = self.conn.principal
        if principal is not None and str(user_id) != principal.name:
            # a cluster node's forward: the entry node validated it against its sender
            return self.broker.authorization.forwarded_by_peer(principal)
        return principal is not None

    def _receive_composite(self, d, data: bytes, envelope, presettled: bool, txn) -> None:
        """A client-side composite target: one copy to each part. A part whose target is gone
        or a `fail` destination that is full refuses the whole send, in a transaction too."""
        po = self.postoffice
        now = int(time.time() * 1000)
        plan = []
        for part in self.target.parts:
            message = Message(data, envelope, part.address, part.routing_type, self.container_id, now)
            routed = po.route(message, part.address, part.routing_type, part.queue)
            refused = po.unrouted(routed, part.address, part.routing_type, part.queue)
            if refused is not None:
                self._reject(d, presettled, txn, conditions.NOT_FOUND, refused)
                return
            plan.extend(routed)
        if self._refused_as_full(d, presettled, txn, plan):
            return
        if txn is not None:  # [transactions]
            coordinator.hold_send(d, presettled, txn, plan)
            return
        if presettled:
            po.post(plan, self._completion(None))
            lib.pn_delivery_settle(d)
        else:
            po.post(plan, self._completion(d))


__all__ = ["ProducerRoutes", "ROUTING_TYPE_ANNOTATION", "JMS_DEST_ANNOTATION", "routing_type_annotation"]
