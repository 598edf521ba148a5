"""Management errors: each carries the HTTP status it answers with (the AMQP endpoint puts the
same number in its `status` application property), so every door reports a failure the same way."""
from __future__ import annotations


class ManagementError(Exception):
    status = 500


class BadRequest(ManagementError):
    """A missing or malformed argument, a selector that does not parse."""
    status = 400


class Unauthorized(ManagementError):
    """No credentials, or wrong ones."""
    status = 401


class Forbidden(ManagementError):
    """Credentials fine, but the user may not do this."""
    status = 403


class NotFound(ManagementError):
    """No such address, queue, connection or operation."""
    status = 404


class Conflict(ManagementError):
    """The request conflicts with the current state (an address that still has queues)."""
    status = 409
