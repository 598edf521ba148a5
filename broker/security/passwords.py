"""Password hashes for `[[security.user]]` (scrypt from the standard library) and `hermod user add`."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import tomllib
from pathlib import Path

from ..config import ConfigError

_N, _R, _P = 2 ** 14, 8, 1


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P)
    return f"scrypt${_N}${_R}${_P}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def verify_password(password: str, encoded: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def _toml_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def add_user(path: Path, name: str, password: str, roles: list[str]) -> None:
    """Append a `[[security.user]]` entry; the plain password is written nowhere."""
    text = path.read_text() if path.exists() else ""
    try:
        existing = tomllib.loads(text).get("security", {}).get("user", [])
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    if any(u.get("name") == name for u in existing):
        raise ConfigError(f"{path}: security.user {name!r} already exists")
    entry = ("\n[[security.user]]\n"
             f"name = {_toml_string(name)}\n"
             f"password_hash = {_toml_string(hash_password(password))}\n"
             f"roles = [{', '.join(_toml_string(r) for r in roles)}]\n")
    with path.open("a") as f:
        if text and not text.endswith("\n"):
            f.write("\n")
        f.write(entry)
