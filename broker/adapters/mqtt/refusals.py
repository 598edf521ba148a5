"""Core errors -> MQTT 5 reason codes: the one table of the adapter's refusals (as
protocol/conditions.py is AMQP's)."""
from __future__ import annotations

from ...core import errors
from ...mqtt import errors as codes

_TABLE: tuple[tuple[type[BaseException], int], ...] = (
    (errors.NotAuthorized, codes.NOT_AUTHORIZED),
    (errors.ResourceLimitExceeded, codes.QUOTA_EXCEEDED),
    (errors.InvalidField, codes.TOPIC_NAME_INVALID),
    (errors.InvalidFilter, codes.TOPIC_FILTER_INVALID),
    (errors.RoutingTypeMismatch, codes.IMPLEMENTATION_SPECIFIC_ERROR),
    (errors.QueueNotFound, codes.IMPLEMENTATION_SPECIFIC_ERROR),
    (errors.AddressNotFound, codes.IMPLEMENTATION_SPECIFIC_ERROR),
    (errors.IllegalState, codes.IMPLEMENTATION_SPECIFIC_ERROR),
)


def reason_for(error: BaseException) -> int:
    """The MQTT 5 reason code (PUBACK, PUBREC, SUBACK, DISCONNECT) refusing for `error`."""
    for kind, code in _TABLE:
        if isinstance(error, kind):
            return code
    return codes.UNSPECIFIED_ERROR


def v3_suback(error: BaseException) -> int:
    """3.1.1 SUBACK has one failure return code for every refusal."""
    return 0x80
