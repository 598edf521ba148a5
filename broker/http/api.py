"""The JSON API's routes (the contract's table) onto `broker.management`, plus `/health`,
`/metrics` and the console's assets (`/`, `/console/...`). Authorization is one hook,
`allowed()`: with no users in `[security]` everything is allowed; otherwise `broker.authorize_http(user, password, permission)` decides (the security
module provides it), with `browse` for reads and `manage` for the rest. That only lets a user
in: management checks each operation on the addresses it touches (and audits it), given the
`Caller` (user, `via="http"`, remote address) built here."""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
from urllib.parse import unquote

from ..management import READ_OPERATIONS, Caller, Deferred, ManagementError
from ..management.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from ..security.throttle import LoginFailed
from . import console
from .origin import BrowserGuard
from .server import Request, Response

METHODS = ("GET", "POST", "DELETE", "HEAD")
PAGE_ARGUMENTS = frozenset({"search", "sort", "offset", "limit"})


def basic_credentials(request: Request) -> tuple[str | None, str | None]:
    header = request.headers.get("authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None, None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None, None
    return (user, password) if sep else (None, None)


async def allowed(broker, user: str | None, password: str | None, permission: str, host: str = "?"):
    """The security hook: True when [security] has no users, else whatever the broker's
    `authorize_http` says (the logged-in principal, or None: a known user without the right;
    it raises LoginFailed for missing or wrong credentials)."""
    if not broker.config.security.get("users"):
        return True
    return await broker.authorize_http(user, password, permission, host=host)


class Api:
    def __init__(self, broker):
        self.broker = broker
        self.management = broker.management
        self.guard = BrowserGuard.from_config(broker.config.http)

    async def __call__(self, request: Request) -> Response:
        if request.method not in METHODS:
            return Response.error(405, f"method {request.method} not allowed")
        path = request.path
        if console.is_console_path(path) and request.method not in ("GET", "HEAD"):
            return Response.error(405, f"method {request.method} not allowed")
        refused = self.guard.refusal(request)  # other web pages: Host, Origin, Content-Type
        if refused is not None:
            return refused
        if path == "/health":
            return Response.json(*self.management.health())
        if console.is_console_path(path):
            return await self._refused(request, "browse") or console.asset(path)
        if path == "/metrics" or path.startswith("/api/") or path == "/api":
            try:
                route = self._route(request)
            except ManagementError as e:
                return Response.error(e.status, str(e))
            if route is None:
                return Response.error(404, f"no such resource: {path}")
            operation, args, created = route
            permission = "browse" if operation in READ_OPERATIONS or operation == "metrics" else "manage"
            refused, who = await self._authorize(request, permission)
            if refused is not None:
                return refused
            caller = self._caller(request, who)
            if operation == "metrics":
                try:
                    snapshot = self.management.metrics_snapshot(caller)
                except ManagementError as e:
                    return Response.error(e.status, str(e))
                return Response(200, await _metrics_body(snapshot), METRICS_CONTENT_TYPE)
            if operation == "queue.list" and PAGE_ARGUMENTS & request.query.keys():
                return self._queue_page(args, caller)
            return await self._call(operation, args, created, caller)
        return Response.error(404, f"no such resource: {path}")

    async def _authorize(self, request: Request, permission: str) -> tuple[Response | None, object]:
        """(the 401/403 answer or None, who): `who` is the logged-in user, or True when no
        credentials are needed (no `[security]` users). Missing or wrong credentials: 401 with
        a Basic challenge (the browser asks again); a known user without the right: 403."""
        user, password = basic_credentials(request)
        try:
            who = await allowed(self.broker, user, password, permission, request.peer)
        except LoginFailed as e:
            return Response(401, json.dumps({"error": str(e)}).encode(),
                            headers={"WWW-Authenticate": 'Basic realm="hermod"'}), None
        except ManagementError as e:
            return Response.error(e.status, str(e)), None
        if who:
            if who is not True:  # each request logs in: a `login` record, as an AMQP login writes
                self.broker.audit("login", peer=request.remote, user=who.name, mechanism="HTTP-BASIC",
                                  via="http")
            return None, who
        return Response.error(403, f"{user} may not {permission}"), None

    def _caller(self, request: Request, who) -> Caller:
        """Who management acts for: the logged-in user, or, with no `[security]` users, the open
        API's unchecked caller."""
        if who is True:
            return Caller(None, via="http", peer=request.remote, checked=False)
        return Caller(who, via="http", peer=request.remote)

    async def _refused(self, request: Request, permission: str) -> Response | None:
        """The 401/403 answer when the request's credentials do not allow `permission`."""
        return (await self._authorize(request, permission))[0]

    def _queue_page(self, args: dict, caller: Caller) -> Response:
        """`GET /api/queues?search=&sort=&offset=&limit=`: still a list (the contract's shape),
        the number of matching queues in `X-Total-Count` (for the console's pager)."""
        try:
            page = self.management.call("queue.page", None, args, caller=caller)
        except ManagementError as e:
            return Response.error(e.status, str(e))
        response = Response.json(200, page["queues"])
        response.headers["X-Total-Count"] = str(page["total"])
        return response

    async def _call(self, operation: str, args: dict, created: bool, caller: Caller) -> Response:
        try:
            result = self.management.call(operation, None, args, caller=caller)
            if isinstance(result, Deferred):
                result = await _wait(result)
        except ManagementError as e:
            return Response.error(e.status, str(e))
        except _StoreFailed as e:  # the operation's change did not reach the store
            return Response.error(503, f"store failed: {e}")
        if result is None:
            return Response.json(204, None)
        text = getattr(result, "json_text", None)  # a peek: written in slices, off the hot path
        if isinstance(text, str):
            return Response(201 if created else 200, text.encode())
        return Response.json(201 if created else 200, result)

    def _route(self, request: Request) -> tuple[str, dict, bool] | None:
        """(operation, arguments, answers 201) for the request, or None: no such route."""
        method = "GET" if request.method == "HEAD" else request.method
        if request.path == "/metrics":
            return ("metrics", {}, False) if method == "GET" else None
        segments = [unquote(s) for s in request.path.split("/")[2:]]
        if segments and segments[-1] == "":
            segments.pop()
        body = _json_body(request) if method == "POST" else {}
        q = request.query
        match segments:
            case ["addresses"]:
                if method == "GET":
                    return "address.list", {}, False
                if method == "POST":
                    return "address.create", body, True
            case ["addresses", name] if method == "DELETE":
                return "address.delete", {"name": name}, False
            case ["addresses", name, "messages"] if method == "POST":
                return "message.send", {**body, "address": name}, False
            case ["queues"]:
                if method == "GET":
                    return "queue.list", {"search": q.get("search"), "sort": q.get("sort") or None,
                                          "offset": _int(q.get("offset"), "offset"),
                                          "limit": _int(q.get("limit"), "limit")}, False
                if method == "POST":
                    return "queue.create", body, True
            case ["queues", name]:
                if method == "GET":
                    return "queue.get", {"name": name}, False
                if method == "DELETE":
                    return "queue.delete", {"name": name}, False
            case ["queues", name, "details"] if method == "GET":
                return "queue.show", {"name": name}, False
            case ["queues", name, "messages"] if method == "GET":
                return "queue.browse", {"name": name, "limit": _int(q.get("limit"), "limit"),
                                        "filter": q.get("filter")}, False
            case ["queues", name, ("purge" | "move" | "retry") as action] if method == "POST":
                return f"queue.{action}", {**body, "name": name}, False
            case ["overview"] if method == "GET":
                return "overview", {}, False
            case ["status"] if method == "GET":
                return "status", {}, False
            case ["diverts"] if method == "GET":
                return "divert.list", {}, False
            case ["subscriptions"] if method == "GET":
                return "subscription.list", {}, False
            case ["definitions"]:
                if method == "GET":
                    return "definitions.export", {}, False
                if method == "POST":
                    return "definitions.import", {"definitions": body}, False
            case ["connections"] if method == "GET":
                return "connection.list", {}, False
            case ["connections", connection_id] if method == "DELETE":
                return "connection.close", {"id": connection_id}, False
            case ["explain"] if method == "GET":
                properties = q.get("properties")
                try:
                    properties = json.loads(properties) if properties else {}
                except ValueError:
                    raise _BadRequest("properties is not JSON") from None
                return "explain", {"address": q.get("address"), "routing_type": q.get("routing_type") or None,
                                   "properties": properties}, False
        return None


class _BadRequest(ManagementError):
    status = 400


def _json_body(request: Request) -> dict:
    if not request.body.strip():
        return {}
    try:
        value = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        raise _BadRequest("the request body is not JSON") from None
    if not isinstance(value, dict):
        raise _BadRequest("the request body must be a JSON object")
    return value


def _int(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise _BadRequest(f"{name} must be an integer") from None


class _StoreFailed(Exception):
    """What a `Deferred` answered with an error (the store's) becomes in `_call`: a 503."""


async def _wait(deferred: Deferred):
    future = asyncio.get_running_loop().create_future()

    def done(value, error):
        if not future.done():
            if error is not None:
                future.set_exception(_StoreFailed(str(error)))
            else:
                future.set_result(value)
    deferred.then(done)
    return await future


async def _metrics_body(snapshot) -> bytes:
    """The loop reads the figures (the snapshot); a worker thread writes the text, which for
    10,000 queues is most of a scrape's cost (benchmarks/metrics_scrape.py)."""
    from ..management.metrics import text
    return await asyncio.to_thread(lambda: text(snapshot).encode())
