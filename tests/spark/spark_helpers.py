"""Helpers for the data pipeline tests (a plain module, imported by name)."""
from __future__ import annotations

from proton import Message
from sqlalchemy import select

from hermod.store.engine import make_engine
from wire_helpers import connect

# Retention on for every address under `pipe.`; the broker records what it accepts there.
RETENTION = """
[[address_settings]]
match = "pipe.#"
retention_days = 7
"""


def send_bodies(url: str, address: str, bodies, **fields) -> None:
    conn = connect(url)
    sender = conn.create_sender(address)
    for body in bodies:
        sender.send(Message(body=body, **fields))
    conn.close()


def table_rows(url: str, table, where=None) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as c:
            query = select(table).order_by(table.c.id)
            if where is not None:
                query = query.where(where)
            return list(c.execute(query))
    finally:
        engine.dispose()
