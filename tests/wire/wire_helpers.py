"""Client helpers for wire tests: real python-qpid-proton clients over loopback."""
from __future__ import annotations

from proton import Data, Delivery, Message, Timeout, symbol
from proton.reactor import DurableSubscription, LinkOption, Selector
from proton.utils import BlockingConnection, LinkDetached  # noqa: F401 - re-exported for tests

TIMEOUT = 10


class Caps(LinkOption):
    """Capabilities on the link's source (receivers) or target (senders)."""

    def __init__(self, *caps: str, on: str = "source"):
        self.caps = caps
        self.on = on

    def apply(self, link) -> None:
        t = link.source if self.on == "source" else link.target
        t.capabilities.put_array(False, Data.SYMBOL)
        t.capabilities.enter()
        for c in self.caps:
            t.capabilities.put_symbol(symbol(c))
        t.capabilities.exit()


class Browse(LinkOption):
    def apply(self, link) -> None:
        link.source.distribution_mode = link.source.DIST_MODE_COPY


class Shared(LinkOption):
    def apply(self, link) -> None:
        link.source.capabilities.put_array(False, Data.SYMBOL)
        link.source.capabilities.enter()
        for c in ("topic", "shared"):
            link.source.capabilities.put_symbol(symbol(c))
        link.source.capabilities.exit()


class Dynamic(LinkOption):
    def apply(self, link) -> None:
        link.source.dynamic = True
        link.source.address = None


def topic() -> Caps:
    return Caps("topic")


def queue() -> Caps:
    return Caps("queue")


def connect(url: str, container_id: str | None = None, **kw) -> BlockingConnection:
    return BlockingConnection(url, timeout=TIMEOUT, container_id=container_id, **kw)


def send(conn: BlockingConnection, address: str | None, bodies, options=None, **message_fields) -> None:
    sender = conn.create_sender(address, options=options)
    for body in bodies:
        sender.send(Message(body=body, **message_fields))
    sender.close()


def receive_bodies(receiver, n: int, timeout: float = TIMEOUT, settle: bool = True) -> list:
    out = []
    for _ in range(n):
        m = receiver.receive(timeout=timeout)
        if settle:
            receiver.accept()
        body = m.body
        out.append(bytes(body) if isinstance(body, memoryview) else body)
    return out


def sync(conn: BlockingConnection) -> None:
    """Make sure everything this client did (dispositions included) has reached the broker:
    a link attach/detach round trip comes back only after the earlier frames were written."""
    conn.create_sender("hermod.management").close()


def nothing_more(receiver, timeout: float = 0.3) -> bool:
    """True when no further message arrives within `timeout` (a bound, not a synchronisation)."""
    try:
        receiver.receive(timeout=timeout)
    except Timeout:  # only the wait running out means "nothing": a detached link raises
        return True
    return False


def settle_modified(receiver, failed: bool = True, undeliverable: bool = False,
                    annotations: dict | None = None) -> None:
    """Settle the oldest unsettled delivery of `receiver` as modified."""
    delivery = receiver.fetcher.unsettled.popleft()
    delivery.local.failed = failed
    delivery.local.undeliverable = undeliverable
    if annotations is not None:
        delivery.local.annotations = annotations
    delivery.update(Delivery.MODIFIED)
    delivery.settle()


def send_in_background(sender, bodies, timeout: float = 60):
    """Send `bodies` from a thread (a producer that may be blocked): (thread, done, errors)."""
    import threading
    done = threading.Event()
    errors: list = []

    def produce():
        try:
            for body in bodies:
                sender.send(Message(body=body), timeout=timeout)
        except BaseException as e:  # noqa: BLE001 - handed to the test in `errors`
            errors.append(e)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    return thread, done, errors


__all__ = ["Caps", "Browse", "Shared", "Dynamic", "DurableSubscription", "Selector", "Message",
           "connect", "send", "send_in_background", "sync", "receive_bodies", "nothing_more", "settle_modified", "topic", "queue"]
