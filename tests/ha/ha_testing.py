"""Shared-store brokers as real processes, and AMQP clients that read what a broker says in
its open frame or its close (redirects, failover-server-list)."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from proton import ConnectionException, Message, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection

from hermod_testing import wait_for

READY = re.compile(r"^hermod listening on (amqp://\S+)")
BACKUP = re.compile(r"^hermod backup of (\S+), waiting for the store lease")
BACKUP_LISTENER = re.compile(r"^hermod backup listener on (amqp://\S+)")
HTTP = re.compile(r"^hermod http on (http://\S+)")
LEASE_S = 2
QUEUE = "orders"


def config_text(node: str, store_url: str, lease_s: float = LEASE_S) -> str:
    return (f'[server]\nport = 0\n[store]\nurl = "{store_url}"\n'
            f'[ha]\nmode = "shared-store"\nnode = "{node}"\nlease_s = {lease_s}\n'
            f'[[address]]\nname = "{QUEUE}"\n[[address.queue]]\nname = "{QUEUE}"\n')


class HaNode:
    """One `hermod run` of a shared-store broker; stdout lines are matched as they come."""

    def __init__(self, node: str, store_url: str, tmp: Path, lease_s: float = LEASE_S,
                 http: bool = False) -> None:
        self.node = node
        self.config = tmp / f"{node}.toml"
        self.config.write_text(config_text(node, store_url, lease_s))
        self.http = http
        self.cwd = tmp
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.proc: subprocess.Popen | None = None
        self._changed = threading.Condition()

    def start(self) -> "HaNode":
        args = [sys.executable, "-m", "hermod.broker", "run", "--config", str(self.config),
                "--http-port", "0" if self.http else "-1"]
        self.proc = subprocess.Popen(args, cwd=self.cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        for stream, lines in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()
        return self

    def _read(self, stream, lines: list[str]) -> None:
        for line in stream:
            with self._changed:
                lines.append(line)
                self._changed.notify_all()

    def line(self, pattern: re.Pattern) -> re.Match | None:
        return next((m for m in map(pattern.search, list(self.stdout)) if m), None)

    def wait_line(self, pattern: re.Pattern, timeout: float) -> re.Match:
        def seen():
            if self.proc.poll() is not None and self.line(pattern) is None:
                raise AssertionError(f"{self.node} exited ({self.proc.returncode}): "
                                     + "".join(self.stderr[-20:]))
            return self.line(pattern)
        return wait_for(seen, timeout, message=f"{self.node}: {pattern.pattern}")

    def wait_ready(self, timeout: float = 30) -> str:
        return self.wait_line(READY, timeout).group(1)

    @property
    def url(self) -> str | None:
        m = self.line(READY)
        return m.group(1) if m else None

    @property
    def listener_url(self) -> str:
        """Where it listens now or listened as a backup (the same port either way)."""
        m = self.line(READY) or self.line(BACKUP_LISTENER)
        return m.group(1)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def refuses_tcp(url: str) -> bool:
    try:
        with socket.create_connection(host_port(url), timeout=1):
            return False
    except OSError:
        return True


class _Probe(MessagingHandler):
    """Opens a connection and records what the broker answered: its open's properties, or the
    condition (name, description, info) it closed the connection with."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.properties = None
        self.condition = None
        self.error = None

    def on_start(self, event):
        event.container.connect(self.url, reconnect=False)

    def on_connection_opened(self, event):
        self.properties = dict(event.connection.remote_properties or {})
        event.connection.close()

    def on_connection_error(self, event):
        self.condition = event.connection.remote_condition
        event.connection.close()

    def on_transport_error(self, event):
        self.error = event.transport.condition
        self.condition = self.condition or event.connection.remote_condition


def probe(url: str, timeout: float = 10) -> _Probe:
    handler = _Probe(url)
    container = Container(handler)
    container.timeout = timeout
    done = threading.Thread(target=container.run, daemon=True)
    done.start()
    done.join(timeout)
    return handler


def failover_urls(properties: dict) -> list[str]:
    servers = properties.get("failover-server-list") or []
    return [f"{s['scheme']}://{s['network-host']}:{int(s['port'])}" for s in servers]


def send_durable(url: str, bodies: list[str]) -> list[str]:
    """Send each body; the ones the broker accepted, in order."""
    accepted = []
    connection = BlockingConnection(url, timeout=10)
    try:
        sender = connection.create_sender(QUEUE)
        for body in bodies:
            sender.send(Message(body=body, durable=True))
            accepted.append(body)
    finally:
        try:
            connection.close()
        except ConnectionException:  # the broker may be gone: what was accepted is known
            pass
    return accepted


def drain(url: str, idle_s: float = 2) -> list[str]:
    """Receive and accept everything on the queue until nothing comes for `idle_s`."""
    connection = BlockingConnection(url, timeout=10)
    bodies = []
    try:
        receiver = connection.create_receiver(QUEUE, credit=100)
        while True:
            try:
                message = receiver.receive(timeout=idle_s)
            except Timeout:  # nothing for idle_s: the queue is empty
                break
            bodies.append(message.body)
            receiver.accept()
    finally:
        connection.close()
    return bodies
