"""Users carried over from the old broker: plain passwords are hashed the way `hermod user add`
does (the plain text is written nowhere); a password that is only available encrypted or hashed
(`ENC(...)`) cannot be verified by Hermod, so the user is imported with a random password nobody
knows: the user, its roles and the permissions naming them stay, and an operator sets a real
password with `hermod user delete` + `hermod user add`."""
from __future__ import annotations

import secrets
from typing import Callable

from ...security.passwords import hash_password


def user_entry(name: str, password: str | None, roles: list[str], note: Callable[[str], None]) -> dict:
    """A `[[security.user]]` table; `note` gets the one line when the password cannot come along."""
    if password is None or not password or password.startswith("ENC("):
        why = "is encrypted or hashed (ENC(...))" if password else "is not known here"
        note(f"user {name!r}: the password {why}, which Hermod cannot verify; imported "
             f"with a random password (set one: hermod user delete, then hermod user add)")
        password = secrets.token_urlsafe(32)
    return {"name": name, "password_hash": hash_password(password), "roles": sorted(set(roles))}
