"""What keeps other web pages from acting through a user's browser (contract, "HTTP").

A page on another site can make the browser send requests here in three ways, each closed by one
rule, checked before credentials are looked at:

- a "simple" cross-site request (a form post, `fetch` with `text/plain`) carries no preflight, so
  every POST and DELETE must say `Content-Type: application/json`, which a page can only send
  after a CORS preflight that this listener never grants (400 otherwise);
- a `fetch` from another origin carries `Origin`: it must be the listener's own (the scheme and
  the `Host` the request came with) or one of `[http] allowed_origins` (403 otherwise);
- DNS rebinding makes the browser believe `evil.example` is this listener, so the page is
  same-origin; the request then carries `Host: evil.example`, which must be the configured host,
  the address the request arrived on, a loopback name or address, or one of `[http]
  allowed_hosts` (421 otherwise). `/health` answers any Host (load balancers probe it by name).
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from .server import Request, Response

JSON_TYPE = "application/json"
DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def host_name(host: str) -> str:
    """The name (or address, without brackets) of a `Host` value, lower case, port dropped."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def _is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def normal_origin(origin: str) -> str | None:
    """`scheme://host[:port]`, lower case, the scheme's default port dropped; None when not an
    http(s) origin (`null`, garbage)."""
    try:
        u = urlsplit(origin.strip())
        port = u.port
    except ValueError:
        return None
    if u.scheme not in DEFAULT_PORTS or not u.hostname or u.path not in ("", "/") or u.query:
        return None
    name = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    if port is None or port == DEFAULT_PORTS[u.scheme]:
        return f"{u.scheme}://{name}"
    return f"{u.scheme}://{name}:{port}"


class BrowserGuard:
    """The three rules for one listener (`host`: its configured `[http] host`; `tls`: HTTPS)."""

    def __init__(self, host: str, tls: bool, allowed_hosts=(), allowed_origins=()):
        self.scheme = "https" if tls else "http"
        self.hosts: set[str] = set()  # names, any port
        self.host_ports: set[str] = set()  # `name:port` entries: that port only
        for entry in (h.strip().lower() for h in allowed_hosts):
            name = host_name(entry)
            if name == entry.strip("[]"):
                self.hosts.add(name)
            else:
                self.host_ports.add(entry)
        if host not in ("", "0.0.0.0", "::"):
            self.hosts.add(host_name(host))
        self.origins = {o for o in (normal_origin(x) for x in allowed_origins) if o}

    @classmethod
    def from_config(cls, http_config) -> BrowserGuard:
        return cls(http_config.host, http_config.tls, getattr(http_config, "allowed_hosts", ()),
                   getattr(http_config, "allowed_origins", ()))

    def refusal(self, request: Request) -> Response | None:
        """421 for a foreign Host, 403 for a foreign Origin, 400 for a POST or DELETE that is not
        JSON; None: the request may go on (to the credentials check)."""
        host = request.headers.get("host")
        if request.path != "/health" and host is not None and not self.host_allowed(host, request.local):
            return Response.error(421, f"this listener does not answer for host {host!r}")
        origin = request.headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return Response.error(403, f"Origin {origin!r} is not allowed")
        if request.method in ("POST", "DELETE") and not is_json(request.headers.get("content-type", "")):
            return Response.error(400, f"{request.method} needs Content-Type: {JSON_TYPE}")
        return None

    def host_allowed(self, host: str, local: str | None) -> bool:
        name = host_name(host)
        if not name:
            return False
        if name in self.hosts or host.strip().lower() in self.host_ports or _is_loopback(name):
            return True
        return local is not None and name == host_name(local if ":" not in local else f"[{local}]")

    def origin_allowed(self, origin: str, host: str | None) -> bool:
        normal = normal_origin(origin)
        if normal is None:
            return False
        if normal in self.origins:
            return True
        # The listener's own origin: this scheme and the Host the browser addressed (already
        # checked above, so a rebinding name never gets here).
        return host is not None and normal == normal_origin(f"{self.scheme}://{host.strip()}")


def is_json(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == JSON_TYPE
