"""`hermod replay`: re-send retained messages of an address, oldest first.

The store's `retained_messages` rows hold each accepted message's bytes exactly as its producer
sent them, so a replay sends those bytes unchanged (header, properties, application properties,
annotations and body keep every AMQP type) to the target address with the routing type the
original send had. The selector is the broker's own engine over the same message view a queue
filter sees.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Iterator


class ReplayError(Exception):
    """A one-line problem with the request (bad time, bad selector, store or broker)."""


def parse_time(value: str) -> int:
    """ISO 8601 text to epoch ms; no zone means UTC (`2026-05-01T12:00:00Z`, `2026-05-01`)."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ReplayError(f"invalid time {value!r}: use ISO 8601, e.g. 2026-05-01T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def message_filter(selector: str | None) -> Callable[[bytes, str, str | None, int, int], bool] | None:
    """A predicate over a retained row's (encoded, address, routing type, arrival, id)."""
    if not selector:
        return None
    from .core.message import Message
    from .core.selectable import message_lookup
    from .protocol import codec
    from .selector import SelectorError, compile_selector

    try:
        matches = compile_selector(selector).matches
    except SelectorError as error:
        raise ReplayError(f"invalid filter: {error}") from None

    def accept(encoded: bytes, address: str, routing_type: str | None, arrival: int, ident: int) -> bool:
        message = Message(encoded, codec.Envelope(encoded), address, routing_type, None, arrival, ident)
        return matches(message_lookup(message))

    return accept


def retained(store_url: str, address: str, from_ms: int, to_ms: int,
             batch: int = 1000) -> Iterator[tuple]:
    """(id, message_id, routing_type, arrival, encoded) of the address's rows in [from, to),
    in id (arrival) order, read in keyset pages so the store is never held in one transaction."""
    from sqlalchemy import select

    from hermod.store.engine import make_engine
    from hermod.store.models import retained_messages as r

    engine = make_engine(store_url)
    try:
        after = 0
        while True:
            with engine.connect() as connection:
                rows = connection.execute(
                    select(r.c.id, r.c.message_id, r.c.routing_type, r.c.arrival, r.c.encoded)
                    .where(r.c.address == address, r.c.arrival >= from_ms, r.c.arrival < to_ms,
                           r.c.id > after)
                    .order_by(r.c.id).limit(batch)).all()
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1].id
    finally:
        engine.dispose()


def replay(store_url: str, url: str, address: str, from_ms: int, to_ms: int,
           selector: str | None = None, to_address: str | None = None,
           user: str | None = None, password: str | None = None) -> int:
    """Re-send the matching retained messages; returns how many were sent (all accepted)."""
    from .spark.amqp_client import Publisher, PublishError

    accept = message_filter(selector)
    target = to_address or address
    publishers: dict[str | None, Publisher] = {}
    sent = 0
    try:
        for row in retained(store_url, address, from_ms, to_ms):
            encoded = bytes(row.encoded)
            if accept is not None and not accept(encoded, address, row.routing_type, row.arrival,
                                                 row.message_id):
                continue
            publisher = publishers.get(row.routing_type)
            if publisher is None:
                publisher = publishers[row.routing_type] = Publisher(
                    url, target, row.routing_type, user=user, password=password)
            publisher.send(encoded)
            sent += 1
        for publisher in publishers.values():
            publisher.flush()
    except PublishError as error:
        raise ReplayError(str(error)) from None
    finally:
        for publisher in publishers.values():
            publisher.close()
    return sent
