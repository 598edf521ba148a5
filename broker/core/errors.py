"""Typed domain errors. The protocol adapter maps each to an AMQP condition in one table
(`broker/protocol/conditions.py`); the core never names wire conditions."""


class HermodError(Exception):
    """Base of every error the core raises on purpose."""


class AddressNotFound(HermodError):
    """The address does not exist and may not be created."""


class QueueNotFound(HermodError):
    """A fully qualified queue name, or a subscription, names no queue."""


class RoutingTypeMismatch(HermodError):
    """A link asked for a routing type the address does not have."""


class IllegalState(HermodError):
    """The request conflicts with the current state (a durable subscription in use, ...)."""


class ResourceLimitExceeded(HermodError):
    """A queue at max_consumers, an address full under the fail policy, a memory limit."""


class NotAuthorized(HermodError):
    """The user may not do this."""


class InvalidFilter(HermodError):
    """A selector that does not parse."""


class InvalidField(HermodError):
    """A request field with a bad value (an empty address, ...)."""


class ResourceDeleted(HermodError):
    """The queue a consumer was attached to was deleted."""


class QueueElsewhere(HermodError):
    """The queue is owned by another live node of the cluster ([ha] mode = "cluster"): the
    client is sent there (`amqp:link:redirect`). `announce` is that node's URL."""

    def __init__(self, message: str, node: str, announce: str, address: str) -> None:
        super().__init__(message)
        self.node = node
        self.announce = announce
        self.address = address
