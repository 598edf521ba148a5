"""Core errors -> the `message` header of a STOMP ERROR frame: the one table of the adapter's
refusals (AMQP's is protocol/conditions.py). The message starts with a short stable phrase a
client can match, then says what was refused; the frame's body repeats it in full."""
from __future__ import annotations

from ...core import errors
from ...core.transactions import UnknownTransaction
from ...mapping.stomp import MappingError
from ...stomp import StompError

class Goodbye(Exception):
    """The broker ends the connection: management closed it, the broker stops, heart-beats
    stopped, CONNECT never came."""


class LoginRefused(Exception):
    """Bad credentials, anonymous not allowed, the user's connection limit."""


_TABLE: tuple[tuple[type[BaseException], str], ...] = (
    (errors.NotAuthorized, "not authorized"),
    (errors.ResourceLimitExceeded, "resource limit exceeded"),
    (errors.AddressNotFound, "address not found"),
    (errors.QueueNotFound, "queue not found"),
    (errors.RoutingTypeMismatch, "routing type mismatch"),
    (errors.InvalidFilter, "invalid selector"),
    (errors.InvalidField, "invalid header"),
    (UnknownTransaction, "unknown transaction"),
    (errors.IllegalState, "illegal state"),
    (errors.ResourceDeleted, "destination deleted"),
    (errors.QueueElsewhere, "queue on another node"),
    (MappingError, "invalid header"),
    (StompError, "malformed frame"),
    (Goodbye, "connection closed"),
    (LoginRefused, "login refused"),
)


def refusal(error: BaseException) -> str:
    """The ERROR frame's `message` for `error`: `<kind>: <what>`, one line."""
    for kind, phrase in _TABLE:
        if isinstance(error, kind):
            break
    else:
        phrase = "internal error" if not isinstance(error, OSError) else "store error"
    text = str(error).replace("\n", " ").replace("\r", " ")
    return f"{phrase}: {text}" if text else phrase


__all__ = ["Goodbye", "LoginRefused", "refusal"]
