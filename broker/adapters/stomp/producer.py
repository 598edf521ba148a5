"""SEND: the frame becomes a message (broker.mapping.stomp), checked and resolved for each target
through the one decision (`Broker.relay_target` inside `acting_as`: `send`, auto-creation under
the user's rights), then published (`core.publishing.publish`). The RECEIPT is written once the
message is stored wherever it went (`done(None)`); a refusal (permission, address full under
`fail`, a target gone, the store) is an ERROR frame, then the connection closes. Under the
`block` policy (or the broker's memory limit) the frame waits, unread input with it, until
there is room: the answer is withheld, as AMQP withholds credit."""
from __future__ import annotations

import itertools
import time
import uuid
from typing import TYPE_CHECKING

from ...core.message import Message
from ...core.publishing import blocked, publish
from ...mapping.neutral import encode_message, envelope_of
from ...mapping.stomp import from_send
from ...stomp import Frame, send_body
from .answers import HANDLED
from .destinations import Target, targets

if TYPE_CHECKING:
    from .connection import StompConnection

WAIT = object()  # `send` could not go now: the frame is to be handled again when there is room


class Producer:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self._ids = itertools.count(1)
        self._id_prefix = f"ID:hermod-stomp-{uuid.uuid4().hex[:12]}:"

    def _resolve(self, frame: Frame) -> list[tuple[str, str | None, str | None]]:
        conn = self.conn
        broker = conn.broker
        found: list[Target] = targets(conn, frame.header("destination"), frame.header("destination-type"))
        out: list[tuple[str, str | None, str | None]] = []
        with broker.acting_as(conn.principal):
            for t in found:
                if t.temporary:
                    out.append((t.address, t.routing, None))
                else:
                    out.append(broker.relay_target(t.address, t.routing, t.queue))
        return out

    def send(self, frame: Frame) -> object:
        """Handle one SEND; WAIT when it must wait for room (nothing was done)."""
        conn = self.conn
        po = conn.broker.postoffice
        txn = conn.transactions.named(frame.header("transaction"))
        body = send_body(frame.first, frame.body)
        resolved = self._resolve(frame)
        for address, _rt, _queue in resolved:
            if blocked(po, address):
                conn.wait_for_room(address)
                return WAIT
        now = int(time.time() * 1000)
        routing = resolved[0][1] if len(resolved) == 1 else None
        neutral = from_send(frame.first, frame.headers, body, f"{self._id_prefix}{next(self._ids)}", routing, now,
                            conn.temporaries.address)
        encoded = encode_message(neutral)
        envelope = envelope_of(encoded)
        slot = conn.answers.reserve()
        receipt = frame.header("receipt")
        remaining = [len(resolved)]
        failure: list[BaseException] = []

        def done(error: BaseException | None) -> None:
            if error is not None and not failure:
                failure.append(error)
            remaining[0] -= 1
            if remaining[0]:
                return
            if failure:
                conn.fail(failure[0], frame, slot)
            else:
                conn.answers.fill(slot, conn.receipt(receipt) if receipt is not None else None)

        client_id = conn.client_id
        for address, rt, queue in resolved:
            publish(po, Message(encoded, envelope, address, rt, client_id, now), done, queue, txn)
        return HANDLED
