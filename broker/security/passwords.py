"""The stored password form of `[[security.user]]`, and `hermod user add|delete|list`.

One form serves every mechanism Hermod offers: per SCRAM hash function, the SCRAM StoredKey and
ServerKey of RFC 5802 under one salt and iteration count:

    scram$<iterations>$<salt, base64>$SCRAM-SHA-256:<StoredKey>:<ServerKey>$SCRAM-SHA-512:...

SCRAM uses them as they are; PLAIN derives the StoredKey of the offered password and compares.
A scrypt hash (the earlier form) cannot serve SCRAM; it is still accepted for PLAIN only.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from .scram import HASHES, ScramKeys, derive_keys

ITERATIONS = 4096  # RFC 7677's minimum; PLAIN pays this once per login
SCHEME = "scram"


@dataclass(frozen=True)
class StoredPassword:
    keys: dict[str, ScramKeys]  # mechanism -> keys
    scrypt: str | None = None    # the earlier form: PLAIN only

    def check(self, password: str) -> bool:
        """PLAIN: does `password` derive the stored keys?"""
        if self.scrypt is not None:
            return _verify_scrypt(password, self.scrypt)
        mech = "SCRAM-SHA-256" if "SCRAM-SHA-256" in self.keys else next(iter(self.keys))
        k = self.keys[mech]
        got = derive_keys(HASHES[mech], password, k.salt, k.iterations)
        return hmac.compare_digest(got.stored_key, k.stored_key)


def hash_password(password: str, iterations: int = ITERATIONS) -> str:
    salt = os.urandom(16)
    parts = [SCHEME, str(iterations), base64.b64encode(salt).decode()]
    for mech, hash_name in HASHES.items():
        k = derive_keys(hash_name, password, salt, iterations)
        parts.append(f"{mech}:{base64.b64encode(k.stored_key).decode()}:{base64.b64encode(k.server_key).decode()}")
    return "$".join(parts)


def parse_stored(encoded: str) -> StoredPassword:
    """The stored form, or ValueError naming what is wrong (never echoing the value)."""
    if encoded.startswith("scrypt$"):
        return StoredPassword({}, scrypt=encoded)
    parts = encoded.split("$")
    if len(parts) < 4 or parts[0] != SCHEME:
        raise ValueError("not a password hash written by `hermod user add`")
    try:
        iterations = int(parts[1])
        salt = base64.b64decode(parts[2], validate=True)
        keys = {}
        for item in parts[3:]:
            mech, stored, server = item.split(":")
            if mech not in HASHES:
                raise ValueError(f"unknown mechanism {mech}")
            keys[mech] = ScramKeys(salt, iterations, base64.b64decode(stored, validate=True),
                                   base64.b64decode(server, validate=True))
    except (ValueError, TypeError) as e:
        raise ValueError(f"malformed password hash ({e})") from None
    if iterations < 1:
        raise ValueError("malformed password hash (iterations)")
    return StoredPassword(keys)


def verify_password(password: str, encoded: str) -> bool:
    try:
        return parse_stored(encoded).check(password)
    except ValueError:
        return False


def _verify_scrypt(password: str, encoded: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


# -- the config file --------------------------------------------------------------------------


def _toml_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read(path: Path) -> tuple[str, list[dict]]:
    text = path.read_text() if path.exists() else ""
    try:
        users = tomllib.loads(text).get("security", {}).get("user", [])
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    return text, users


def _write(path: Path, text: str) -> None:
    """Replace the file atomically; a file Hermod creates is readable by its owner only, an
    existing one keeps its mode."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.hermod-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def add_user(path: Path, name: str, password: str, roles: list[str]) -> None:
    """Append a `[[security.user]]` entry; the plain password is written nowhere."""
    text, existing = _read(path)
    if any(u.get("name") == name for u in existing):
        raise ConfigError(f"{path}: security.user {name!r} already exists")
    entry = ("\n[[security.user]]\n"
             f"name = {_toml_string(name)}\n"
             f"password_hash = {_toml_string(hash_password(password))}\n"
             f"roles = [{', '.join(_toml_string(r) for r in roles)}]\n")
    if text and not text.endswith("\n"):
        text += "\n"
    _write(path, text + entry)


_TABLE_HEADER = re.compile(r"^\s*\[")


def delete_user(path: Path, name: str) -> None:
    """Remove the `[[security.user]]` block naming `name`; the rest of the file stays as written."""
    text, existing = _read(path)
    if not any(u.get("name") == name for u in existing):
        raise ConfigError(f"{path}: no security.user {name!r}")
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "[[security.user]]":
            j = i + 1
            while j < len(lines) and not _TABLE_HEADER.match(lines[j]):
                j += 1
            block = "".join(lines[i + 1:j])
            try:
                is_it = tomllib.loads(block).get("name") == name
            except tomllib.TOMLDecodeError:
                is_it = False
            if is_it:
                while out and not out[-1].strip():
                    out.pop()  # the blank line `add` put before it
                out.extend(lines[j:])
                _write(path, "".join(out))
                return
            out.extend(lines[i:j])
            i = j
            continue
        out.append(lines[i])
        i += 1
    raise ConfigError(f"{path}: security.user {name!r} is not a [[security.user]] table this command can edit")


def list_users(path: Path) -> list[tuple[str, list[str]]]:
    if not path.exists():
        raise ConfigError(f"{path}: cannot read config file")
    _, users = _read(path)
    return [(u.get("name", "?"), list(u.get("roles", []))) for u in users]
