"""Core errors -> the Java exceptions a Classic client raises (the one table for OpenWire).

The client rebuilds an ExceptionResponse's exception by its class name, so a refusal named
`javax.jms.JMSSecurityException` is raised as such by `createConnection`, `createProducer`,
`send`..."""
from __future__ import annotations

from ...core import errors
from ...openwire import model

SECURITY = "javax.jms.JMSSecurityException"
INVALID_DESTINATION = "javax.jms.InvalidDestinationException"
INVALID_SELECTOR = "javax.jms.InvalidSelectorException"
RESOURCE_ALLOCATION = "javax.jms.ResourceAllocationException"
INVALID_CLIENT_ID = "javax.jms.InvalidClientIDException"
ILLEGAL_STATE = "javax.jms.IllegalStateException"
TRANSACTION_ROLLED_BACK = "javax.jms.TransactionRolledBackException"
JMS = "javax.jms.JMSException"
XA = "javax.transaction.xa.XAException"
IO = "java.io.IOException"

_TABLE: tuple[tuple[type[BaseException], str], ...] = (
    (errors.NotAuthorized, SECURITY),
    (errors.AddressNotFound, INVALID_DESTINATION),
    (errors.QueueNotFound, INVALID_DESTINATION),
    (errors.RoutingTypeMismatch, INVALID_DESTINATION),
    (errors.ResourceDeleted, INVALID_DESTINATION),
    (errors.InvalidFilter, INVALID_SELECTOR),
    (errors.ResourceLimitExceeded, RESOURCE_ALLOCATION),
    (errors.InvalidField, INVALID_DESTINATION),
    (errors.IllegalState, ILLEGAL_STATE),
)


class Refusal(Exception):
    """A refusal the adapter decides itself, with the Java class the client raises."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(message)
        self.java_class = java_class


def java_class(exc: BaseException) -> str:
    if isinstance(exc, Refusal):
        return exc.java_class
    for kind, name in _TABLE:
        if isinstance(exc, kind):
            return name
    return JMS


def throwable(exc: BaseException) -> model.Throwable:
    return model.Throwable(java_class(exc), str(exc) or type(exc).__name__)


def exception_response(correlation_id: int, exc: BaseException) -> model.ExceptionResponse:
    return model.ExceptionResponse(correlation_id=correlation_id, exception=throwable(exc))


__all__ = ["Refusal", "exception_response", "java_class", "throwable"]
