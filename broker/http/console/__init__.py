"""The web console's assets: a page and plain ES modules shipped in the package (no build step).

`/` is the page; `/console/NAME` the files under `static/`. Files are read once and kept (a few
tens of kilobytes). Every answer carries a Content-Security-Policy that allows only this origin's
scripts and styles: the console shows hostile input (message bodies, queue names) and builds its
DOM with text nodes, and the policy is the second fence should a slip ever reach `innerHTML`.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ..server import Response

PREFIX = "/console/"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def is_console_path(path: str) -> bool:
    return path == "/" or path.startswith(PREFIX)


@lru_cache(maxsize=None)
def _files() -> dict[str, tuple[bytes, str]]:
    """Asset name to (bytes, content type): only these names are ever served (no path walking)."""
    out = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        suffix = entry.name[entry.name.rfind("."):]
        if entry.is_file() and suffix in CONTENT_TYPES:
            out[entry.name] = (entry.read_bytes(), CONTENT_TYPES[suffix])
    return out


def asset(path: str) -> Response:
    name = "index.html" if path == "/" else path[len(PREFIX):]
    found = _files().get(name)
    if found is None:
        return Response.error(404, f"no such resource: {path}")
    body, content_type = found
    return Response(200, body, content_type, headers=dict(SECURITY_HEADERS))
