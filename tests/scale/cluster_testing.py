"""Cluster nodes ([ha] mode = "cluster") as real `hermod run` processes on loopback, and the
AMQP clients the tests drive them with (a consumer that follows `amqp:link:redirect`)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from proton import Message, Timeout
from proton.utils import BlockingConnection, LinkDetached, SendException

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ha"))

from ha_testing import HaNode  # noqa: E402

LEASE_S = 2
REDIRECT = "amqp:link:redirect"


READY = re.compile(r"^hermod listening on (amqps?://\S+)")


def cluster_config(node: str, store_url: str, lease_s: float = LEASE_S, ha: str = "",
                   server: str = "", extra: str = "") -> str:
    """`ha` and `server`: more lines of those tables; `extra`: more tables."""
    return (f'[server]\nport = 0\n{server}[store]\nurl = "{store_url}"\n'
            f'[ha]\nmode = "cluster"\nnode = "{node}"\nlease_s = {lease_s}\n{ha}{extra}')


class ClusterNode(HaNode):
    """One `hermod run` of a cluster node; no configured queues (sends create them)."""

    def __init__(self, node: str, store_url: str, tmp: Path, lease_s: float = LEASE_S,
                 http: bool = False, **config: str) -> None:
        super().__init__(node, store_url, tmp, lease_s, http=http)
        self.config.write_text(cluster_config(node, store_url, lease_s, **config))

    def wait_ready(self, timeout: float = 30) -> str:
        """The main listener's URL (amqps:// on a TLS listener)."""
        return self.wait_line(READY, timeout).group(1)


def send(url: str, address: str, bodies: list[str], **conn_kw) -> list[str]:
    """Send each durable body, waiting for its outcome; the accepted ones."""
    connection = BlockingConnection(url, timeout=10, **conn_kw)
    try:
        sender = connection.create_sender(address)
        return [body for body in bodies if sender.send(Message(body=body, durable=True))]
    finally:
        connection.close()


def refusal_of_send(url: str, address: str, body: str, **conn_kw):
    """Send one durable body that the broker must refuse: the outcome state it gave."""
    connection = BlockingConnection(url, timeout=30, **conn_kw)
    try:
        sender = connection.create_sender(address)
        try:
            sender.send(Message(body=body, durable=True))
        except SendException as refused:
            return refused.state
        raise AssertionError(f"{body!r} to {address} was accepted")
    finally:
        connection.close()


def redirected(url: str, address: str, **conn_kw) -> tuple[str, dict] | None:
    """The refusal of a receiver on `address` when it is a redirect, else None."""
    refusal = redirect_of(url, address, **conn_kw)
    return refusal if refusal is not None and refusal[0] == REDIRECT else None


def redirect_of(url: str, address: str, **conn_kw) -> tuple[str, dict] | None:
    """Attach a receiver to `address`: None if the broker took it, else (condition name, info)
    of the refusal."""
    connection = BlockingConnection(url, timeout=10, **conn_kw)
    try:
        connection.create_receiver(address, credit=0)
        return None
    except LinkDetached as refused:
        condition = refused.link.remote_condition
        return condition.name, {str(k): v for k, v in (condition.info or {}).items()}
    finally:
        connection.close()


def followed(url: str, address: str, **conn_kw) -> str:
    """Where a consumer of `address` ends up after following redirects (at most two hops)."""
    for _ in range(3):
        refusal = redirect_of(url, address, **conn_kw)
        if refusal is None:
            return url
        name, info = refusal
        assert name == REDIRECT, refusal
        url = f"{info['scheme']}://{info['network-host']}:{int(info['port'])}"
    raise AssertionError(f"redirected more than twice for {address}")


def receive(url: str, address: str, count: int | None = None, idle_s: float = 2,
            accept: bool = True, **conn_kw) -> list[str]:
    """Receive (and accept) up to `count` bodies, or until nothing comes for `idle_s`."""
    connection = BlockingConnection(url, timeout=10, **conn_kw)
    bodies: list[str] = []
    try:
        receiver = connection.create_receiver(address, credit=100)
        while count is None or len(bodies) < count:
            try:
                message = receiver.receive(timeout=idle_s)
            except Timeout:
                break
            bodies.append(message.body)
            if accept:
                receiver.accept()
    finally:
        connection.close()
    return bodies
