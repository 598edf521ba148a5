"""Small blocking AMQP clients for the command line (cold path: Proton's own client API)."""
from __future__ import annotations

import json
import uuid

from proton import ConnectionException, Data, Delivery, Message, Timeout, symbol
from proton.reactor import DurableSubscription, Filter, LinkOption, Selector
from proton.utils import BlockingConnection, LinkDetached

from .target import Target, TargetError, as_target


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


class Refused(ConnectionError):
    """The broker refused what a command asked (an attach, a send): one line for the CLI,
    naming the AMQP condition. A ConnectionError, as management refusals always were, so
    callers of `management_call` catch it as before."""


def refusal_line(error: BaseException) -> str | None:
    """The one line the CLI prints for a client command's refusal or failure; None for
    anything else (a bug, which keeps its traceback)."""
    if isinstance(error, (ManagementCallError, Refused, TargetError)):
        return str(error)
    if isinstance(error, Timeout):
        return f"timed out: {error} (is the broker up and reachable? --url, $HERMOD_URL)"
    if isinstance(error, ConnectionException):
        return f"connection lost: {error}"
    return None


def condition_text(condition) -> str:
    """`amqp:unauthorized-access: user bob may not ...` from a Proton condition (or None)."""
    if condition is None:
        return "no reason given"
    return f"{condition.name}: {condition.description}" if condition.description else str(condition.name)


def _connect(url: str | Target, container_id: str | None = None, timeout: float | None = 30) -> BlockingConnection:
    target = as_target(url)
    try:
        return BlockingConnection(target.url, timeout=timeout, container_id=container_id,
                                  **target.connection_options())
    except Exception as e:  # noqa: BLE001 - the CLI prints one line
        raise ConnectionError(target.scrub(f"{target.shown}: {e}")) from None


def _send(conn: BlockingConnection, sender, message: Message, what: str) -> None:
    """Send unsettled and wait for the outcome; a refusal raises Refused with its condition
    (Proton's own SendException carries only the outcome's number)."""
    delivery = sender.link.send(message)
    conn.wait(lambda: delivery.settled or delivery.remote_state in _FINAL, msg=f"sending {what}")
    state = delivery.remote_state
    if state == Delivery.REJECTED:
        reason = condition_text(delivery.remote.condition)
        delivery.settle()
        raise Refused(f"{what} rejected: {reason}")
    if state in (Delivery.RELEASED, Delivery.MODIFIED):
        delivery.settle()
        raise Refused(f"{what} released: the broker could not take it now; try again")
    delivery.settle()


_FINAL = (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)


def _refusal(e: LinkDetached, what: str) -> Refused:
    return Refused(f"{what} refused: {condition_text(getattr(e.link, 'remote_condition', None))}")


def produce(url: str | Target, address: str, count: int, size: int, durable: bool = False, topic: bool = False,
            body: bytes | str | None = None, properties: dict | None = None) -> int:
    conn = _connect(url)
    try:
        caps = Capabilities("topic" if topic else "queue", on_source=False)
        try:
            sender = conn.create_sender(address, options=[caps])
        except LinkDetached as e:
            raise _refusal(e, f"sending to {address}") from None
        content = b"x" * size if body is None else body
        for i in range(count):
            try:
                _send(conn, sender, Message(body=content, durable=durable, id=str(uuid.uuid4()),
                                            properties={"i": i, **(properties or {})}), f"message {i + 1}")
            except LinkDetached as e:
                raise _refusal(e, f"sending to {address}") from None
        return count
    finally:
        conn.close()


def consume(url: str | Target, address: str, count: int, selector: str | None = None, topic: bool = False,
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
        try:
            receiver = conn.create_receiver(address, name=durable, options=options, credit=min(count, 1000) or 1)
        except LinkDetached as e:
            raise _refusal(e, f"consuming from {address}") from None
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


def management_call(url: str | Target, operation: str, timeout: float = 10, args: dict | None = None):
    """Call `operation` on the broker's `hermod.management` endpoint. `args` go as application
    properties (dicts and lists as JSON text); a JSON string answer is decoded."""
    conn = _connect(url, timeout=timeout)
    try:
        return _management_call(conn, operation, timeout, args)
    except LinkDetached as e:  # refused, e.g. amqp:unauthorized-access: one line for the CLI
        raise _refusal(e, f"management {operation}") from None
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


__all__ = ["produce", "consume", "management_call", "Filter", "Refused"]
