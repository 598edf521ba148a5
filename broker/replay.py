"""`hermod replay`: re-send retained messages of an address, oldest first.

The store's `retained_messages` rows hold each accepted message's bytes exactly as its producer
sent them, so a replay sends those bytes unchanged (header, properties, application properties,
annotations and body keep every AMQP type) to the target address with the routing type the
original send had. The selector is the broker's own engine over the same message view a queue
filter sees.
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import times


class ReplayError(Exception):
    """A one-line problem with the request (bad time, bad selector, store or broker)."""


def parse_time(value: str) -> int:
    """ISO 8601 text to epoch ms (see `times.parse_time`); ReplayError when it is not."""
    try:
        return times.parse_time(value)
    except times.TimeError as error:
        raise ReplayError(str(error)) from None


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


def retained(store_url: str, address: str, from_ms: int, to_ms: int) -> Iterator[tuple]:
    """(id, message_id, routing_type, arrival, encoded) of the address's rows in [from, to),
    oldest first (`store.retention.retained_window`)."""
    from hermod.store.engine import make_engine
    from hermod.store.retention import retained_window

    engine = make_engine(store_url)
    try:
        yield from retained_window(engine, address, from_ms, to_ms)
    finally:
        engine.dispose()


def replay(store_url: str, url: str, address: str, from_ms: int, to_ms: int,
           selector: str | None = None, to_address: str | None = None,
           user: str | None = None, password: str | None = None, on_sent=None) -> int:
    """Re-send the matching retained messages; returns how many were sent (all accepted).
    `on_sent(n)`, when given, hears the running count (a progress line)."""
    from .tools.amqp_client import Publisher, PublishError

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
            if on_sent is not None:
                on_sent(sent)
        for publisher in publishers.values():
            publisher.flush()
    except PublishError as error:
        raise ReplayError(str(error)) from None
    finally:
        for publisher in publishers.values():
            publisher.close()
    return sent
