"""Blocking AMQP clients for the data pipeline: a publisher of already-encoded messages (Spark
writers, `hermod replay`) and a queue browser (the data source's live-queue read).

Both run on Proton's blocking API (cold path, one connection per Spark task). The publisher sends
the message bytes as they are, so what the pipeline encoded (or what a producer originally sent,
for replay) reaches the broker byte for byte, with every AMQP type intact.
"""
from __future__ import annotations

from typing import Iterable, Iterator

WINDOW = 500  # unsettled deliveries in flight before waiting for outcomes


class PublishError(Exception):
    """A message was not accepted, or the connection was lost: the caller's task fails."""


def connect(url: str, user: str | None = None, password: str | None = None, timeout: float = 30):
    from proton.utils import BlockingConnection

    options: dict = {}
    if user:
        options.update(user=user, password=password or "", allowed_mechs="PLAIN",
                       allow_insecure_mechs=True)
    try:
        return BlockingConnection(url, timeout=timeout, **options)
    except Exception as error:  # noqa: BLE001 - one line for the caller
        raise PublishError(f"cannot connect to {url}: {error}") from None


def _capability(routing_type: str | None):
    from proton import Data, symbol
    from proton.reactor import LinkOption

    name = {"anycast": "queue", "multicast": "topic"}.get(routing_type or "")

    class _Capability(LinkOption):
        def apply(self, link) -> None:
            if name is None:
                return
            terminus = link.target if link.is_sender else link.source
            terminus.capabilities.put_array(False, Data.SYMBOL)
            terminus.capabilities.enter()
            terminus.capabilities.put_symbol(symbol(name))
            terminus.capabilities.exit()

    return _Capability()


class Publisher:
    """Sends encoded messages to one address unsettled, `WINDOW` at a time, and waits until the
    broker has settled each one; anything but `accepted` raises PublishError."""

    def __init__(self, url: str, address: str, routing_type: str | None = "anycast",
                 user: str | None = None, password: str | None = None, timeout: float = 60) -> None:
        self.url = url
        self.address = address
        self.timeout = timeout
        self.connection = connect(url, user, password, timeout)
        try:
            self.sender = self.connection.create_sender(address, options=[_capability(routing_type)])
        except Exception as error:  # noqa: BLE001
            self.close()
            raise PublishError(f"cannot send to {address}: {error}") from None
        self.link = self.sender.link
        self.sent = 0
        self._pending: list = []

    def send(self, encoded: bytes) -> None:
        link = self.link
        delivery = link.delivery(link.delivery_tag())
        link.stream(encoded)
        link.advance()
        self._pending.append(delivery)
        if len(self._pending) >= WINDOW:
            self.flush()

    def send_all(self, messages: Iterable[bytes]) -> int:
        for encoded in messages:
            self.send(encoded)
        self.flush()
        return self.sent

    def flush(self) -> None:
        """Wait until every delivery sent so far is settled by the broker, and check outcomes."""
        from proton import Delivery

        pending = self._pending
        if not pending:
            return
        try:
            self.connection.wait(lambda: all(d.remote_state or d.settled for d in pending),
                                 msg=f"sending to {self.address}", timeout=self.timeout)
        except Exception as error:  # noqa: BLE001 - timeout or a lost connection
            raise PublishError(f"sending to {self.address} at {self.url}: {error}") from None
        for delivery in pending:
            if delivery.remote_state != Delivery.ACCEPTED:
                condition = getattr(delivery.remote, "condition", None)
                raise PublishError(f"message to {self.address} not accepted: "
                                   f"{_outcome(delivery.remote_state)}"
                                   + (f" ({condition})" if condition else ""))
            delivery.settle()
        self.sent += len(pending)
        pending.clear()

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:  # noqa: BLE001 - closing after a failure
            pass

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _outcome(state) -> str:
    from proton import Delivery

    return {Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
            Delivery.MODIFIED: "modified"}.get(state, f"outcome {state}")


def browse(url: str, queue: str, user: str | None = None, password: str | None = None,
           batch: int = 1000, timeout: float = 60) -> Iterator[bytes]:
    """The encoded messages a queue holds, in queue order, read by a browser (distribution mode
    copy): credit is granted in drain mode until a drain brings no message. The messages stay."""
    from proton.reactor import LinkOption

    class _Copy(LinkOption):
        def apply(self, link) -> None:
            link.source.distribution_mode = link.source.DIST_MODE_COPY

    connection = connect(url, user, password, timeout)
    try:
        receiver = connection.create_receiver(queue, options=[_Copy()], credit=0)
        link, fetcher = receiver.link, receiver.fetcher
        while True:
            link.drain(batch)
            connection.wait(lambda: not link.draining(), msg=f"browsing {queue}", timeout=timeout)
            got = 0
            while fetcher.has_message:
                message = fetcher.pop()
                if fetcher.unsettled:
                    fetcher.settle()
                got += 1
                yield message.encode()
            if got == 0:
                break
    finally:
        connection.close()
