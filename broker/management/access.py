"""Who calls a management operation, and the checks and audit records made for it.

Every door (the AMQP endpoint `hermod.management`, the HTTP API, hence the CLI and the console)
hands management a `Caller`; management asks the one decision point
(`broker.authorization`, security/authorization.py) for each address an operation touches, and
writes the audit record of each action here, so no door checks or audits on its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core import errors as core_errors
from ..security.auth import Principal
from ..security.authorization import Authorization
from .errors import Forbidden

# Arguments the audit record leaves out: message bodies, and what is not the caller's.
UNAUDITED_ARGUMENTS = frozenset({"body", "requester", "caller", "operation"})


@dataclass(frozen=True)
class Caller:
    """`principal`: the logged-in user (None: not logged in). `via`: "amqp" or "http". `peer`: the
    remote address. `checked` False only for the HTTP API with no `[security]` users, which the
    contract leaves open (an operator on the listener's host)."""
    principal: Principal | None
    via: str = "amqp"
    peer: str | None = None
    checked: bool = True

    @property
    def user(self) -> str | None:
        return self.principal.name if self.principal is not None else None


UNCHECKED = Caller(None, via="internal", checked=False)


class Access:
    """The checks of one management call: `require` per address, `require_broker_wide` for the
    operations that speak for the whole broker, `view` for lists."""

    def __init__(self, authorization: Authorization | None, caller: Caller, operation: str):
        self.authorization = authorization
        self.caller = caller
        self.operation = operation

    def require(self, right: str, address: str) -> None:
        """Forbidden (403) naming the operation, the right and the address, unless allowed."""
        if not self.caller.checked or self.authorization is None:
            return
        try:
            self.authorization.require(self.caller.principal, right, address, via=self.caller.via,
                                       peer=self.caller.peer, action=self.operation)
        except core_errors.NotAuthorized as e:
            raise Forbidden(f"{self.operation}: {e}") from None

    def require_broker_wide(self, right: str) -> None:
        """Forbidden unless an entry with `match = "#"` grants `right`."""
        if not self.caller.checked or self.authorization is None:
            return
        try:
            self.authorization.require_broker_wide(self.caller.principal, right, via=self.caller.via,
                                                   peer=self.caller.peer, action=self.operation)
        except core_errors.NotAuthorized as e:
            raise Forbidden(f"{self.operation}: {e} (a broker-wide right needs an entry with match \"#\")") \
                from None

    def broker_wide(self, right: str) -> bool:
        """The silent form, for a figure that is shown only to broker-wide readers."""
        return (not self.caller.checked or self.authorization is None
                or self.authorization.broker_wide(self.caller.principal, right))

    def view(self) -> Callable[[str], bool] | None:
        """Which addresses lists and `explain` show: those the caller may `browse` (None: all)."""
        if not self.caller.checked or self.authorization is None:
            return None
        return self.authorization.view(self.caller.principal)


def audit_record(audit: Callable[..., None], caller: Caller, operation: str, args: dict) -> None:
    """One `management` record per action that passed its checks: user, door, remote address,
    operation and arguments (never a message body)."""
    audit("management", user=caller.user, via=caller.via, peer=caller.peer, operation=operation,
          arguments={k: _auditable(v) for k, v in args.items() if k not in UNAUDITED_ARGUMENTS and v is not None})


def _auditable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _auditable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_auditable(v) for v in value]
    return str(value)
