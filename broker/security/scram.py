"""SCRAM (RFC 5802, with SHA-256 per RFC 7677 and SHA-512) on the server side, and the keys a
stored password holds. Written from the RFCs; no dependency.

The server never sees or keeps the password: a user's entry holds, per hash function, the salt,
the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"). PLAIN is checked by deriving the same StoredKey
from the offered password (see passwords.py).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(Exception):
    """The client's SCRAM message is malformed or the proof is wrong."""


@dataclass(frozen=True)
class ScramKeys:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    # RFC 5802 asks for SASLprep; Hermod uses the UTF-8 bytes as given (ASCII passwords agree).
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def derive_keys(hash_name: str, password: str, salt: bytes, iterations: int) -> ScramKeys:
    salted = salted_password(hash_name, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return ScramKeys(salt, iterations, stored_key, server_key)


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. `first(client_first)` returns the user name it names; the caller then
    looks the user up and calls `challenge(keys)`; `final(client_final)` checks the proof and
    returns the server-final message (sent as the sasl-outcome's additional data)."""

    def __init__(self, mechanism: str):
        self.hash_name = HASHES[mechanism]
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._keys: ScramKeys | None = None

    def first(self, message: bytes) -> str:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("client-first-message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
            raise ScramError("unsupported GS2 header (channel binding is not offered)")
        self._gs2 = parts[0] + "," + parts[1] + ","
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if attrs and attrs[0][0] == "m":
            raise ScramError("mandatory SCRAM extension not supported")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("client-first-message needs n= and r=")
        self._nonce = attrs[1][1] + base64.b64encode(os.urandom(18)).decode()
        return _unescape_name(attrs[0][1])

    def challenge(self, keys: ScramKeys) -> bytes:
        self._keys = keys
        self._server_first = (f"r={self._nonce},s={base64.b64encode(keys.salt).decode()},"
                              f"i={keys.iterations}")
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """The server-final message when the proof is right; ScramError when not."""
        keys = self._keys
        if keys is None:
            raise ScramError("client-final before client-first")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("client-final-message is not UTF-8") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attrs = dict(_attributes(without_proof))
        try:
            binding = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("malformed base64 in client-final-message") from None
        if binding != self._gs2.encode() or attrs.get("r") != self._nonce:
            raise ScramError("channel binding or nonce mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(keys.stored_key, auth_message, self.hash_name).digest()
        if len(proof) != len(signature):
            raise ScramError("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), keys.stored_key):
            raise ScramError("wrong password")
        server_signature = hmac.new(keys.server_key, auth_message, self.hash_name).digest()
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side, for tests and tools (`hermod` clients that want SCRAM)."""

    def __init__(self, mechanism: str, user: str, password: str):
        self.hash_name = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        name = user.replace("=", "=3D").replace(",", "=2C")
        self.client_first_bare = f"n={name},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = dict(_attributes(text))
        if not attrs["r"].startswith(self.nonce):
            raise ScramError("server nonce does not extend ours")
        salted = salted_password(self.hash_name, self.password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash_name).digest()
        self._server_signature = hmac.new(server_key, auth_message, self.hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return hmac.compare_digest(server_final, b"v=" + base64.b64encode(self._server_signature))
