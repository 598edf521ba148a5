"""Small blocking AMQP clients for the command line (cold path: Proton's own client API)."""
from __future__ import annotations

import json
import uuid

from proton import Data, Message, symbol
from proton.reactor import DurableSubscription, Filter, LinkOption, Selector
from proton.utils import BlockingConnection, LinkDetached


class Capabilities(LinkOption):
    """Ask for a routing type the Artemis way: capability `queue` or `topic` on the terminus."""

    def __init__(self, *caps: str, on_source: bool = True):
        self.caps = [symbol(c) for c in caps]
        self.on_source = on_source

    def apply(self, link) -> None:
        terminus = link.source if self.on_source else link.target
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        for c in self.caps:
            terminus.capabilities.put_symbol(c)
        terminus.capabilities.exit()


class ManagementCallError(Exception):
    """The broker answered a management request with an error status."""

    def __init__(self, status, message: str):
        super().__init__(message)
        self.status = status


def _connect(url: str, container_id: str | None = None, timeout: float | None = 30) -> BlockingConnection:
    try:
        # amqp://user:password@host:port: the user chose to send a password over this URL, so
        # PLAIN is allowed on it (Proton refuses PLAIN without TLS unless told).
        return BlockingConnection(url, timeout=timeout, container_id=container_id,
                                  allow_insecure_mechs="@" in url)
    except Exception as e:  # noqa: BLE001 - the CLI prints one line
        raise ConnectionError(f"{url}: {e}") from None


def produce(url: str, address: str, count: int, size: int, durable: bool = False, topic: bool = False) -> int:
    conn = _connect(url)
    try:
        caps = Capabilities("topic" if topic else "queue", on_source=False)
        sender = conn.create_sender(address, options=[caps])
        body = b"x" * size
        for i in range(count):
            sender.send(Message(body=body, durable=durable, id=str(uuid.uuid4()),
                                properties={"i": i}))
        return count
    finally:
        conn.close()


def consume(url: str, address: str, count: int, selector: str | None = None, topic: bool = False,
            durable: str | None = None, client_id: str | None = None, quiet: bool = False,
            timeout: float | None = None) -> int:
    if durable and client_id is None:
        client_id = "hermod-consumer"
    conn = _connect(url, container_id=client_id)
    try:
        options: list = [Capabilities("topic" if topic or durable else "queue")]
        if selector:
            options.append(Selector(selector))
        if durable:
            options.append(DurableSubscription())
        receiver = conn.create_receiver(address, name=durable, options=options, credit=min(count, 1000) or 1)
        got = 0
        while got < count:
            msg = receiver.receive(timeout=timeout)
            receiver.accept()
            got += 1
            if not quiet:
                body = msg.body
                text = bytes(body).decode(errors="replace") if isinstance(body, (bytes, memoryview)) else body
                print(f"{got}: {str(text)[:80]}")
        if durable:
            receiver.detach()  # keep the subscription for the next run
        return got
    finally:
        conn.close()


def management_call(url: str, operation: str, timeout: float = 10, args: dict | None = None):
    """Call `operation` on the broker's `hermod.management` endpoint. `args` go as application
    properties (dicts and lists as JSON text); a JSON string answer is decoded."""
    conn = _connect(url, timeout=timeout)
    try:
        return _management_call(conn, operation, timeout, args)
    except LinkDetached as e:  # refused, e.g. amqp:unauthorized-access: one line for the CLI
        raise ConnectionError(f"management {operation} refused: {e}") from None
    finally:
        conn.close()


def _management_call(conn: BlockingConnection, operation: str, timeout: float, args: dict | None):
    receiver = conn.create_receiver(None, dynamic=True)
    reply_to = receiver.link.remote_source.address
    sender = conn.create_sender("hermod.management")
    request_id = str(uuid.uuid4())
    properties = {"operation": operation}
    for key, value in (args or {}).items():
        if value is not None:
            properties[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
    sender.send(Message(id=request_id, reply_to=reply_to, properties=properties))
    reply = receiver.receive(timeout=timeout)
    receiver.accept()
    props = reply.properties or {}
    if props.get("status") != 200:
        raise ManagementCallError(props.get("status"), f"{operation}: {props.get('error')}")
    if args is not None and isinstance(reply.body, str):
        return json.loads(reply.body)
    return reply.body


__all__ = ["produce", "consume", "management_call", "Filter"]
