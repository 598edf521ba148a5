"""Prepared transaction branches in the store (`prepared_transactions`): a `ports.PreparedRecord`
as a row (JSON body, message bytes in base64) and back."""
from __future__ import annotations

import base64
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from hermod.broker.core.ports import MessageRecord, PreparedRecord

from .models import prepared_transactions


def _message(m: MessageRecord) -> dict[str, Any]:
    return {"id": m.id, "address": m.address, "encoded": base64.b64encode(m.encoded).decode("ascii"),
            "routing_type": m.routing_type, "priority": m.priority, "expiration": m.expiration,
            "scheduled_time": m.scheduled_time, "arrival": m.arrival}


def _record(d: dict[str, Any]) -> MessageRecord:
    return MessageRecord(d["id"], d["address"], base64.b64decode(d["encoded"]), d["routing_type"],
                         d["priority"], d["expiration"], d["scheduled_time"], d["arrival"])


def store(connection: Connection, branch: PreparedRecord) -> None:
    """Write a prepared branch (a branch prepared again after a lost outcome replaces its row)."""
    body = {"sends": [{"message": _message(m), "queues": list(queues)} for m, queues in branch.sends],
            "acks": [[queue, message_id] for queue, message_id in branch.acks]}
    highest = max((m.id for m, _ in branch.sends), default=0)
    forget(connection, branch.xid)
    connection.execute(insert(prepared_transactions).values(
        xid=branch.xid, highest_message_id=highest, body=body))


def forget(connection: Connection, xid: bytes) -> None:
    connection.execute(delete(prepared_transactions).where(prepared_transactions.c.xid == xid))


def load(connection: Connection) -> list[PreparedRecord]:
    out = []
    for row in connection.execute(select(prepared_transactions)):
        body = row.body or {}
        out.append(PreparedRecord(
            xid=bytes(row.xid),
            sends=tuple((_record(s["message"]), tuple(s["queues"])) for s in body.get("sends", ())),
            acks=tuple((str(q), int(m)) for q, m in body.get("acks", ()))))
    return out
