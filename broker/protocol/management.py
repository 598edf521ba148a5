"""The management endpoint over AMQP request/response: a request sent to `hermod.management`
with application property `operation` gets a reply on its `reply_to` address, correlated by the
request's message id, with `status` (200, or the management error's 400/404/409 and an `error`
text).

Arguments are the request's other application properties; values AMQP properties cannot carry
(the `properties` object of `explain` and `message.send`) may be JSON text, and a request body
that is a JSON object supplies arguments too. The statistics operations (`queue.stat`,
`address.stat`, `store.stat`) answer an amqp-value as they always did; the others answer a JSON
string. Cold path: proton.Message is fine here."""
from __future__ import annotations

import json
import logging
import time

from proton import Message as ProtonMessage

from ..core import limits
from ..core.errors import InvalidField
from ..core.message import ANYCAST, Message
from ..management import Caller, Deferred, ManagementError
from . import codec

log = logging.getLogger("hermod.management")

JSON_TEXT_ARGUMENTS = ("properties", "routing_types", "definitions")


def request_arguments(request: ProtonMessage) -> dict:
    args = {}
    body = request.body
    if isinstance(body, str) and body.lstrip().startswith("{"):
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            args.update(parsed)
    for key, value in (request.properties or {}).items():
        if key == "operation":
            continue
        if key in JSON_TEXT_ARGUMENTS and isinstance(value, str) and value[:1] in "{[":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        args[str(key)] = value
    return args


class ManagementEndpoint:
    def __init__(self, broker):
        self.broker = broker

    def handle(self, message: Message, principal=None, peer: str | None = None) -> None:
        """Answer one request for `principal` (the connection's login) from `peer`: management
        checks and audits the operation; this only decodes it and writes the answer."""
        request = ProtonMessage()
        request.decode(message.encoded)
        reply_to = request.reply_to
        management = self.broker.management
        caller = Caller(principal, via="amqp", peer=peer)
        if reply_to:
            try:
                limits.check_name(reply_to, "reply_to")
            except InvalidField as e:  # there is nowhere to answer
                log.info("management request dropped: %s", e)
                return
            if not management.reply_allowed(caller, reply_to):
                log.warning("management request dropped: user %s may not send to its reply_to %s",
                            caller.user, reply_to)
                return
        operation = str((request.properties or {}).get("operation"))
        correlation = request.id or request.correlation_id
        legacy = operation in management.operations()
        try:
            result = management.call(operation, reply_to, request_arguments(request), caller=caller)
        except KeyError as e:
            return self._reply(reply_to, correlation, None, 400, str(e.args[0]))
        except ManagementError as e:
            return self._reply(reply_to, correlation, None, e.status, str(e))
        if isinstance(result, Deferred):
            result.then(lambda value, error: self._reply(
                reply_to, correlation, None if error else _json(value),
                503 if error else 200, f"store failed: {error}" if error else None))
            return
        self._reply(reply_to, correlation, result if legacy else _json(result), 200, None)

    def _reply(self, reply_to, correlation, body, status: int, error: str | None) -> None:
        if not reply_to:
            log.info("management request without reply_to ignored (status %s)", status)
            return
        response = ProtonMessage(body=body, correlation_id=correlation,
                                 properties={"status": status, **({"error": error} if error else {})})
        response.address = reply_to
        encoded = bytes(response.encode())
        po = self.broker.postoffice
        reply = Message(encoded, codec.Envelope(encoded), reply_to, ANYCAST, None, int(time.time() * 1000))
        plan = po.route(reply, reply_to, None)
        if not po.post_unordered(plan):  # a reply queue that is not temporary: in order, as any send
            po.post(plan)


def _json(value) -> str:
    """The answer's JSON: a peek's was written already, in slices (management/messages.py)."""
    text = getattr(value, "json_text", None)
    return text if isinstance(text, str) else json.dumps(value)
