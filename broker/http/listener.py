"""Starting the HTTP listener for `hermod run`: port rules, TLS, the readiness line."""
from __future__ import annotations

import ssl
import sys

from .api import Api
from .server import HttpServer


class HttpStartError(Exception):
    """One line for the user (port in use, TLS not configured)."""


def _tls_context(cfg):
    tls = getattr(cfg, "tls", None)
    if tls is None or not getattr(tls, "cert", None):
        raise HttpStartError("[http] tls = true needs [tls] cert and key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert, tls.key)
    return context


async def start_http(broker, cfg, http_port: int | None = None,
                     handler=None) -> tuple[HttpServer, str] | None:
    """The listener and its URL, or None when the port is -1. `handler`: instead of the API
    (a shared-store backup answers 503 to everything)."""
    port = http_port if http_port is not None else cfg.http.effective_port(cfg.server.port)
    if port == -1:
        return None
    if not 0 <= port <= 65535:
        raise HttpStartError(f"HTTP port {port}: expected 0-65535, or -1 for none")
    context = _tls_context(cfg) if cfg.http.tls else None
    server = HttpServer(handler or Api(broker), cfg.http.head_timeout_s)
    host = cfg.http.host
    try:
        bound_host, bound_port = await server.start(host, port, ssl=context)
    except OSError as e:
        raise HttpStartError(f"cannot listen for HTTP on {host}:{port}: {e.strerror or e}") from None
    shown = host if host not in ("", "0.0.0.0", "::") else bound_host
    return server, f"{'https' if context else 'http'}://{shown}:{bound_port}"


def print_http_ready(url: str) -> None:
    sys.stdout.write(f"hermod http on {url}\n")
    sys.stdout.flush()
