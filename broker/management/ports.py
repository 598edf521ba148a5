"""What Management needs from outside the core, as narrow interfaces the adapters fill in.

Management stays pure (no Proton, no SQL, no HTTP): the protocol package registers a
`ConnectionRegistry` (the live AMQP connections) and a `MessageCodec` (reading bodies for a
peek, building a message for a send) when it starts.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from ..core.message import Message


class ConnectionRegistry(Protocol):
    def list_connections(self) -> list[dict]:
        """`{"id", "remote", "user", "protocol", "container_id", "links": [...]}` per open connection
        (`user`: the logged-in user)."""

    def close_connection(self, connection_id: str) -> bool:
        """Close it with amqp:connection:forced; False when there is no such connection."""

    def figures(self) -> dict:
        """Counts for /metrics: `connections`, `sessions`, `publishers`, `per_listener` (name to
        open connections) (cheap: no link details)."""

    # Optional (management asks with getattr, NoConnections has neither):
    # `listeners() -> list[dict]`: each listener, its bound port and protocols;
    # `consumer_peers() -> dict[int, dict]`: core consumer id -> its connection and link.


class MessageCodec(Protocol):
    def readable_body(self, encoded: bytes) -> tuple[Any, str]:
        """The body as JSON-able data and how it is written: ("text", "base64" or "amqp-value")."""

    def bounded_body(self, bare: Any, max_bytes: int) -> tuple[Any, str, bool]:
        """`readable_body` of the bare message (bytes or a memoryview), cut to its first
        `max_bytes` bytes without reading the rest: (body, encoding, truncated)."""

    def new_message(self, address: str, body: Any, properties: dict, durable: bool,
                    routing_type: str | None, arrival_ms: int) -> Message:
        """A message as a producer would have sent it (data section for text)."""


class NoConnections:
    """Until the protocol adapter registers itself: nothing is connected."""

    def list_connections(self) -> list[dict]:
        return []

    def close_connection(self, connection_id: str) -> bool:
        return False

    def figures(self) -> dict:
        return {}


class Deferred:
    """The answer of an operation that waits for the store (move, retry, send). Each door waits in
    its own way: HTTP awaits a future, the AMQP endpoint replies from the callback."""

    __slots__ = ("_callbacks", "_outcome")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[Any, BaseException | None], None]] = []
        self._outcome: tuple[Any, BaseException | None] | None = None

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        if self._outcome is not None:
            return
        self._outcome = (value, error)
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(value, error)

    def then(self, callback: Callable[[Any, BaseException | None], None]) -> None:
        if self._outcome is not None:
            callback(*self._outcome)
        else:
            self._callbacks.append(callback)
