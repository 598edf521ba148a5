"""The one table from the core's typed errors to AMQP error conditions."""
from __future__ import annotations

from urllib.parse import urlsplit

import cproton

from .binding import PropertyDict, int32, symbol

from ..core import errors
from ..core.transactions import TransactionTimedOut

NOT_FOUND = "amqp:not-found"
ILLEGAL_STATE = "amqp:illegal-state"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
INVALID_FIELD = "amqp:invalid-field"
INTERNAL_ERROR = "amqp:internal-error"
RESOURCE_DELETED = "amqp:resource-deleted"
DECODE_ERROR = "amqp:decode-error"
NOT_IMPLEMENTED = "amqp:not-implemented"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
CONNECTION_FORCED = "amqp:connection:forced"
TRANSACTION_TIMEOUT = "amqp:transaction:timeout"
LINK_REDIRECT = "amqp:link:redirect"
FAILED = "failed"  # Artemis's condition for an anonymous-relay send it cannot route

_BY_ERROR: dict[type, str] = {
    TransactionTimedOut: TRANSACTION_TIMEOUT,
    errors.AddressNotFound: NOT_FOUND,
    errors.QueueNotFound: NOT_FOUND,
    errors.RoutingTypeMismatch: ILLEGAL_STATE,
    errors.IllegalState: ILLEGAL_STATE,
    errors.ResourceLimitExceeded: RESOURCE_LIMIT_EXCEEDED,
    errors.NotAuthorized: UNAUTHORIZED_ACCESS,
    errors.InvalidFilter: INVALID_FIELD,
    errors.InvalidField: INVALID_FIELD,
    errors.ResourceDeleted: RESOURCE_DELETED,
    errors.QueueElsewhere: LINK_REDIRECT,
}


def condition_for(error: BaseException) -> str:
    for cls in type(error).__mro__:
        name = _BY_ERROR.get(cls)
        if name is not None:
            return name
    return INTERNAL_ERROR


def info_for(error: BaseException):
    """The info map of the error's condition, or None: a redirect names where to go, as
    Artemis does (hostname, network-host, port, scheme, and the address to attach to)."""
    if not isinstance(error, errors.QueueElsewhere):
        return None
    info = endpoint(error.announce)
    info[symbol("address")] = error.address
    return info


def endpoint(announce: str) -> PropertyDict:
    """An announce URL as Artemis names a server to AMQP clients: hostname, network-host, port
    and scheme (a redirect's info map and a `failover-server-list` entry)."""
    parts = urlsplit(announce)
    scheme = parts.scheme or "amqp"
    port = parts.port or (5671 if scheme == "amqps" else 5672)
    host = parts.hostname or "localhost"
    return PropertyDict({symbol("hostname"): host, symbol("network-host"): host,
                         symbol("port"): int32(port), symbol("scheme"): scheme})


def relay_condition(error: BaseException) -> str:
    """An anonymous-relay send the broker cannot route is `failed` (Artemis); a `to` that is
    not a valid name (too long) is `amqp:invalid-field`."""
    return INVALID_FIELD if isinstance(error, errors.InvalidField) else FAILED


def set_condition(cond, name: str, description: str) -> None:
    """Fill a Proton condition (of a link, a connection, a disposition)."""
    cproton.pn_condition_set_name(cond, name)
    cproton.pn_condition_set_description(cond, description)
