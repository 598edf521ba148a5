"""Does the client certificate an open connection presented still verify against a CA bundle?

A reload that changes `[tls] ca` closes the connections whose certificate no longer verifies
(contract, "Security"). Python's `ssl` verifies only inside a handshake and has no call that
checks a certificate it holds against a CA file, so this asks the OpenSSL library the `ssl`
module has already loaded into the process (found in /proc/self/maps, so that it is the very
same library, in a packaged `dist/hermod` too), through ctypes: an X509 store with the bundle,
then X509_verify_cert with the TLS client purpose, as the handshake did.

The connection's certificate is its leaf only (Python 3.11 does not give the chain the client
sent): a client that relied on sending an intermediate CA the bundle lacks is closed, and
reconnects through a full handshake. When the library cannot be used at all, every connection
with a client certificate is treated as no longer verifying: a reload never leaves a revoked CA's
clients in.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import ssl  # also loads libcrypto into the process before it is looked for
from functools import lru_cache

log = logging.getLogger("hermod.tls")

_X509_PURPOSE_SSL_CLIENT = 1


@lru_cache(maxsize=1)
def _libcrypto():
    """The libcrypto the ssl module uses, with the few calls bound; None when not found."""
    path = None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.rsplit(" ", 1)[-1].strip()
                if "/libcrypto" in name:
                    path = name
                    break
    except OSError:
        pass
    path = path or ctypes.util.find_library("crypto")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        vp, ip = ctypes.c_void_p, ctypes.c_int
        for name, res, args in (
                ("d2i_X509", vp, [vp, ctypes.POINTER(vp), ctypes.c_long]),
                ("X509_free", None, [vp]),
                ("X509_STORE_new", vp, []),
                ("X509_STORE_free", None, [vp]),
                ("X509_STORE_load_locations", ip, [vp, ctypes.c_char_p, ctypes.c_char_p]),
                ("X509_STORE_CTX_new", vp, []),
                ("X509_STORE_CTX_free", None, [vp]),
                ("X509_STORE_CTX_init", ip, [vp, vp, vp, vp]),
                ("X509_STORE_CTX_set_purpose", ip, [vp, ip]),
                ("X509_verify_cert", ip, [vp])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
    except (OSError, AttributeError) as e:
        log.warning("cannot use %s to check client certificates on reload: %s", path, e)
        return None
    return lib


class CaBundle:
    """A CA file loaded once; `verifies(der)` for each connection's certificate. `close()` frees it."""

    def __init__(self, cafile):
        self._lib = _libcrypto()
        self._store = None
        if self._lib is not None:
            store = self._lib.X509_STORE_new()
            if store and self._lib.X509_STORE_load_locations(store, os.fsencode(cafile), None) == 1:
                self._store = store
            elif store:
                self._lib.X509_STORE_free(store)

    def verifies(self, der: bytes) -> bool:
        lib, store = self._lib, self._store
        if lib is None or store is None:
            return False
        buf = ctypes.create_string_buffer(der, len(der))
        cursor = ctypes.c_void_p(ctypes.addressof(buf))
        cert = lib.d2i_X509(None, ctypes.byref(cursor), len(der))
        if not cert:
            return False
        ctx = lib.X509_STORE_CTX_new()
        try:
            if not ctx or lib.X509_STORE_CTX_init(ctx, store, cert, None) != 1:
                return False
            lib.X509_STORE_CTX_set_purpose(ctx, _X509_PURPOSE_SSL_CLIENT)
            return lib.X509_verify_cert(ctx) == 1
        finally:
            if ctx:
                lib.X509_STORE_CTX_free(ctx)
            lib.X509_free(cert)

    def close(self) -> None:
        if self._lib is not None and self._store is not None:
            self._lib.X509_STORE_free(self._store)
            self._store = None


def peer_certificate(conn) -> bytes | None:
    """The DER client certificate `conn`'s TLS handshake verified, or None (no TLS, none sent)."""
    sock = conn.socket
    if sock is None:
        return None
    ssl_object = sock.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    try:
        return ssl_object.getpeercert(binary_form=True)
    except (ValueError, ssl.SSLError):
        return None
