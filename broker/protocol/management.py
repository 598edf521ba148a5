"""The management endpoint over AMQP request/response: a request sent to `hermod.management`
with application property `operation` gets a reply on its `reply_to` address, correlated by the
request's message id, with the result as an amqp-value body and `status` 200 (or 400 and an
`error` text). Cold path: proton.Message is fine here."""
from __future__ import annotations

import logging
import time

from proton import Message as ProtonMessage

from ..core.message import ANYCAST, Message
from . import codec

log = logging.getLogger("hermod.management")


class ManagementEndpoint:
    def __init__(self, broker):
        self.broker = broker

    def handle(self, message: Message, principal=None) -> None:
        request = ProtonMessage()
        request.decode(message.encoded)
        reply_to = request.reply_to
        operation = (request.properties or {}).get("operation")
        self.broker.audit("management", user=principal.name if principal is not None else None,
                          operation=str(operation))
        try:
            body, status, error = self.broker.management.call(str(operation), reply_to), 200, None
        except KeyError as e:
            body, status, error = None, 400, str(e.args[0])
        if not reply_to:
            log.info("management request %s without reply_to ignored", operation)
            return
        response = ProtonMessage(body=body, correlation_id=request.id or request.correlation_id,
                                 properties={"status": status, **({"error": error} if error else {})})
        response.address = reply_to
        encoded = bytes(response.encode())
        po = self.broker.postoffice
        reply = Message(encoded, codec.Envelope(encoded), reply_to, ANYCAST, None, int(time.time() * 1000))
        po.post(po.route(reply, reply_to, None))
