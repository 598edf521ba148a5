"""Support for the bridge tests: broker configurations with a [[bridge]], a quick sender (every
message in flight at once, returns when all are accepted), a reader that takes what arrives,
and the bridge's row from `bridge.stat`."""
from __future__ import annotations

import socket

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton import Timeout
from proton.utils import BlockingConnection

from hermod.broker.tools.clients import management_call


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bridged_queue_config(url: str, *, queue: str = "outbound", address: str | None = "inbound",
                         user: str | None = None, password_env: str | None = None, extra: str = "") -> str:
    """A local broker whose durable queue `queue` is forwarded to `address` at `url`."""
    lines = [f'[[address]]\nname = "{queue}"\n  [[address.queue]]\n  name = "{queue}"\n',
             extra,
             f'[[bridge]]\nname = "to-remote"\nqueue = "{queue}"\nurl = "{url}"\n']
    if address is not None:
        lines.append(f'address = "{address}"\n')
    if user is not None:
        lines.append(f'user = "{user}"\npassword_env = "{password_env}"\n')
    return "".join(lines)


REMOTE_CONFIG = '[[address]]\nname = "inbound"\n  [[address.queue]]\n  name = "inbound"\n'


class _Sender(MessagingHandler):
    def __init__(self, url: str, address: str, messages: list[Message], **conn_kw):
        super().__init__(auto_settle=True)
        self.url, self.address, self.messages, self.conn_kw = url, address, messages, conn_kw
        self.next = 0
        self.accepted = 0
        self.refused: list = []

    def on_start(self, event):
        conn = event.container.connect(self.url, **self.conn_kw)
        event.container.create_sender(conn, self.address)

    def on_sendable(self, event):
        while event.sender.credit and self.next < len(self.messages):
            event.sender.send(self.messages[self.next])
            self.next += 1

    def on_accepted(self, event):
        self.accepted += 1
        if self.accepted + len(self.refused) == len(self.messages):
            event.connection.close()

    def on_rejected(self, event):
        self.refused.append(event.delivery.remote.condition)
        if self.accepted + len(self.refused) == len(self.messages):
            event.connection.close()


def send_all(url: str, address: str, messages: list[Message]) -> int:
    """Send every message (all in flight at once); the number accepted."""
    sender = _Sender(url, address, messages)
    Container(sender).run()
    assert not sender.refused, sender.refused
    return sender.accepted


def numbered(count: int, start: int = 0, **kw) -> list[Message]:
    return [Message(id=f"m-{n}", body=f"body {n}", durable=True, properties={"n": n}, **kw)
            for n in range(start, start + count)]


def read_all(url: str, address: str, count: int, timeout: float = 30, idle: float = 0.0,
             **conn_kw) -> list[Message]:
    """Take messages until `count` arrived (then, with `idle`, anything more within `idle`
    seconds: duplicates), or fail after `timeout` with what did arrive."""
    conn = BlockingConnection(url, timeout=timeout, **conn_kw)
    got: list[Message] = []
    try:
        receiver = conn.create_receiver(address, credit=1000)
        while len(got) < count:
            try:
                got.append(receiver.receive(timeout=timeout))
            except Timeout:
                raise AssertionError(f"only {len(got)} of {count} messages arrived") from None
            receiver.accept()
        while idle:
            try:
                got.append(receiver.receive(timeout=idle))
            except Timeout:
                break
            receiver.accept()
    finally:
        conn.close()
    return got


def bridge_row(url: str) -> dict:
    rows = management_call(url, "bridge.stat")
    assert len(rows) == 1, rows
    return rows[0]


def queue_row(url: str, queue: str) -> dict:
    return next(r for r in management_call(url, "queue.stat") if r["queue"] == queue)
