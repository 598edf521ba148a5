"""Who may log in: the users of `[security]`, the mechanisms offered and the answers to a login.
No Proton; the SASL frames are protocol/sasl.py's business, and the growing delay after failed
logins from one remote address (with the password checks off the event loop) is
security/throttle.py's.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

from ..config import ConfigError
from .passwords import ITERATIONS, StoredPassword, parse_stored
from .scram import HASHES, ScramKeys

ANONYMOUS_USER = "anonymous"
ANONYMOUS_ROLE = "anonymous"
DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "PLAIN")
SUPPORTED = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "EXTERNAL", "ANONYMOUS")


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str]
    mechanism: str = "ANONYMOUS"


ANONYMOUS = Principal(ANONYMOUS_USER, frozenset({ANONYMOUS_ROLE}))


class Authenticator:
    def __init__(self, security: dict):
        self.anonymous = security.get("anonymous", True)
        self.mechanisms = tuple(security.get("mechanisms", DEFAULT_MECHANISMS))
        self.users: dict[str, tuple[StoredPassword, frozenset[str]]] = {}
        for i, u in enumerate(security.get("users", ())):
            try:
                stored = parse_stored(u.get("password_hash", ""))
            except ValueError as e:
                raise ConfigError(f"security.user[{i}].password_hash: {e}") from None
            self.users[u["name"]] = (stored, frozenset(u.get("roles", ())))
        self.max_connections = security.get("max_connections_per_user", -1)
        self._connections: dict[str, int] = {}  # user -> open connections
        self._secret = os.urandom(32)  # for the made-up salts of unknown users

    # -- what is offered ------------------------------------------------------------------------
    def offered(self, mechanisms: tuple[str, ...] | None, external: bool) -> list[str]:
        """The sasl-server-mechanisms of one connection: the listener's (or [security]'s) list,
        EXTERNAL only with a verified client certificate, ANONYMOUS only when allowed."""
        out = [m for m in (mechanisms or self.mechanisms) if m not in ("ANONYMOUS", "EXTERNAL")]
        if external:
            out.insert(0, "EXTERNAL")
        if self.anonymous:
            out.append("ANONYMOUS")
        return out

    # -- logins ---------------------------------------------------------------------------------
    def plain(self, user: str, password: str) -> Principal | None:
        """A PBKDF2 check: blocking, a few ms; callers go through security/throttle.py, which runs
        it off the event loop."""
        entry = self.users.get(user)
        if entry is None:
            # Spend the same work as for a real user: timing must not tell who exists.
            StoredPassword({"SCRAM-SHA-256": self._dummy_keys("SCRAM-SHA-256", user)}).check(password)
            return None
        stored, roles = entry
        return Principal(user, roles, "PLAIN") if stored.check(password) else None

    def scram_keys(self, mechanism: str, user: str) -> ScramKeys:
        """The user's keys, or made-up ones (a stable salt per name) that no proof matches."""
        entry = self.users.get(user)
        if entry is not None and mechanism in entry[0].keys:
            return entry[0].keys[mechanism]
        return self._dummy_keys(mechanism, user)

    def principal(self, user: str, mechanism: str) -> Principal | None:
        entry = self.users.get(user)
        return Principal(user, entry[1], mechanism) if entry is not None else None

    def _dummy_keys(self, mechanism: str, user: str) -> ScramKeys:
        digest = hmac.new(self._secret, user.encode(), hashlib.sha256).digest()
        size = hashlib.new(HASHES[mechanism]).digest_size
        return ScramKeys(digest[:16], ITERATIONS, os.urandom(size), os.urandom(size))

    # -- connections per user ---------------------------------------------------------------------
    def connect(self, principal: Principal) -> bool:
        """Count a logged-in connection; False (not counted) when the user is at the limit."""
        n = self._connections.get(principal.name, 0)
        if 0 <= self.max_connections <= n:
            return False
        self._connections[principal.name] = n + 1
        return True

    def disconnect(self, principal: Principal) -> None:
        n = self._connections.get(principal.name, 0) - 1
        if n > 0:
            self._connections[principal.name] = n
        else:
            self._connections.pop(principal.name, None)
