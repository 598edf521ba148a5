"""Bridges ([[bridge]]): forward a local queue to an address on another AMQP 1.0 broker, at
least once.

A `Bridge` is a consumer of its local queue like any link (the queue calls `send`), attached
once at start and kept for the broker's life, so the queue never looks abandoned while the
remote is away. Its credit is what the remote link grants, capped by a window of unconfirmed
sends (WINDOW messages, WINDOW_BYTES bytes), and 0 while there is no link. A message leaves the
local queue only when the remote settles it `accepted` (the acknowledgement is then stored as a
consumer's is). A send stays in the window until its outcome is stored, not only until the
remote settles it: a broker killed while its store lags resends at most WINDOW messages (a
loaded CI run once saw 1,594 duplicates when only the remote's part was counted).

A refusal that can pass is retried with back-off: `released`, `modified` (whatever its flags:
the remote's trouble, not the message's, so no delivery attempt is counted and it never reaches
the dead-letter address) and `rejected` with `amqp:resource-limit-exceeded` (a remote that is
full for a while, `address_full_policy = "fail"`) put the message back on the queue unchanged,
in order, and the bridge sends nothing for RETRY_MIN_S, doubling with each further such refusal
up to RETRY_MAX_S, back to the minimum at the next `accepted`. Only another `rejected` sends
the message to the local dead-letter address, with the remote's condition on the copy (message
annotations `x-opt-bridge-condition` and `x-opt-bridge-description`) and in the log.

When the connection ends, every unconfirmed send goes back to the queue in order, not counted
as a failed attempt (the message did nothing wrong), and is sent again after the reconnect:
the only duplicates a bridge makes. Reconnects back off exponentially, BACKOFF_MIN_S doubling to
BACKOFF_MAX_S, back to the minimum once a link is up again.
"""
from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .core import errors, links as core_links
from .protocol import outgoing

log = logging.getLogger("hermod.bridge")

WINDOW = 1000  # unconfirmed sends at most
WINDOW_BYTES = 8 * 1024 * 1024  # and their bytes (Proton keeps each until it is settled)
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 30.0
RETRY_MIN_S = 0.25  # after a refusal that can pass: the remote would refuse again at once
RETRY_MAX_S = 5.0
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
CONDITION_ANNOTATION = "x-opt-bridge-condition"  # on a dead letter: the remote's rejection
DESCRIPTION_ANNOTATION = "x-opt-bridge-description"

CONNECTING, UP, BACKOFF, STOPPED = "connecting", "up", "backoff", "stopped"


class BridgeError(ValueError):
    """A bridge that cannot start (a one-line start-up error)."""


@dataclass(frozen=True)
class Remote:
    """Where a bridge connects, from its url, user and password_env."""
    host: str
    port: int
    tls: bool
    user: str | None
    password: str | None

    @property
    def shown(self) -> str:
        return f"{'amqps' if self.tls else 'amqp'}://{self.host}:{self.port}"


def remote_for(cfg, where: str, environ=os.environ) -> Remote:
    """The remote of one [[bridge]] entry; the password is read from its environment variable
    now, so a missing one stops the start with one line."""
    url = urlsplit(cfg.url)
    password = None
    if cfg.password_env is not None:
        password = environ.get(cfg.password_env)
        if password is None:
            raise BridgeError(f"{where}.password_env: environment variable {cfg.password_env} is not set")
    user = cfg.user if cfg.user is not None else (unquote(url.username) if url.username else None)
    tls = url.scheme == "amqps"
    return Remote(url.hostname or "", url.port or (5671 if tls else 5672), tls, user, password)


def client_context(tls_config) -> ssl.SSLContext:
    """Verifies the remote against [tls] ca when set, else the system's CAs."""
    ctx = ssl.create_default_context(cafile=str(tls_config.ca) if tls_config and tls_config.ca else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class Bridge:
    """One [[bridge]]: the local queue's consumer, and the connection it forwards on."""

    is_producer = False

    def __init__(self, broker, cfg, remote: Remote, loop, ssl_context: ssl.SSLContext | None):
        self.broker = broker
        self.name = cfg.name
        self.cfg = cfg
        self.remote = remote
        self.loop = loop
        self.ssl_context = ssl_context
        self.state = CONNECTING
        self.last_error = ""
        self.forwarded = 0
        self.consumer = None
        self.connection: outgoing.OutgoingConnection | None = None
        self.unconfirmed: dict = {}  # Ref -> its size, in the order sent
        self.unconfirmed_bytes = 0
        self.storing = 0  # outcomes the remote gave that the store has not taken yet (in the window)
        self.delay = BACKOFF_MIN_S
        self._timer = None
        self._paused_until = 0.0
        self.retry_delay = RETRY_MIN_S  # the next pause after a refusal that can pass

    # -- start and stop ----------------------------------------------------------------------------
    def attach(self) -> None:
        """Consume the local queue (created by the usual rules when it does not exist)."""
        address, _, queue = self.cfg.queue.partition("::")
        req = core_links.ConsumerRequest(address, None, queue or None)
        try:
            self.consumer = core_links.attach_consumer(self.broker.postoffice, req, self, owner=self)
        except errors.HermodError as e:
            raise BridgeError(f"bridge {self.name}: cannot consume queue {self.cfg.queue}: {e}") from None

    @property
    def queue(self):
        return self.consumer.queue

    @property
    def target(self) -> str:
        return self.cfg.address or self.queue.address.name

    def start(self) -> None:
        self._connect()

    def stop(self) -> None:
        self._set_state(STOPPED, self.last_error)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connect(self) -> None:
        self._timer = None
        if self.state == STOPPED:
            return
        self._set_state(CONNECTING, self.last_error)
        self.connection = outgoing.OutgoingConnection(
            self.loop, self, self.remote.host, self.remote.port, ssl_context=self.ssl_context,
            user=self.remote.user, password=self.remote.password,
            container_id=f"{self.broker.container_id}-bridge-{self.name}",
            link_name=f"hermod-bridge-{self.name}", source=self.queue.name, target=self.target,
            idle_timeout_s=self.broker.config.server.idle_timeout_s)
        self.connection.start()

    def _set_state(self, state: str, error: str) -> None:
        self.state = state
        self.last_error = error

    # -- the connection's reports ------------------------------------------------------------------
    def link_up(self) -> None:
        log.info("bridge %s: forwarding queue %s to %s at %s", self.name, self.queue.name, self.target,
                 self.remote.shown)
        self._set_state(UP, "")
        self.delay = BACKOFF_MIN_S
        self.credit_changed()

    def credit_changed(self) -> None:
        """The consumer's credit: the link's, within the window; none while paused or down."""
        c = self.consumer
        conn = self.connection
        if self.state != UP or conn is None or self.loop.time() < self._paused_until:
            c.credit = 0
            return
        room = WINDOW - len(self.unconfirmed) - self.storing if self.unconfirmed_bytes < WINDOW_BYTES else 0
        credit = max(0, min(conn.credit, room))
        if credit != c.credit:
            c.credit = credit
            if credit:
                self.queue.host.schedule(self.queue)

    def outcome(self, ref, kind: str, failed: bool, undeliverable: bool,
                condition: tuple[str, str] | None = None) -> None:
        size = self.unconfirmed.pop(ref, None)
        if size is None:
            return
        self.unconfirmed_bytes -= size
        queue = ref.queue
        if kind == outgoing.ACCEPTED:
            self.forwarded += 1
            self.retry_delay = RETRY_MIN_S
            queue.acknowledge(ref, self._stored(ref, acked=True))
        elif kind == outgoing.REJECTED and (condition is None or condition[0] != RESOURCE_LIMIT_EXCEEDED):
            name, description = condition or ("", "")
            log.warning("bridge %s: %s at %s rejected message %s (%s%s); dead-lettered", self.name,
                        self.target, self.remote.shown, ref.message.id, name or "no condition",
                        f": {description}" if description else "")
            queue.reject(ref, self._stored(ref, acked=False),
                         {CONDITION_ANNOTATION: name, DESCRIPTION_ANNOTATION: description})
        else:  # released, modified, full for now: later, unchanged, not counted as an attempt
            queue.release(ref)
            self._back_off(kind if condition is None else f"{kind} ({condition[0]})")
        self.credit_changed()

    def _back_off(self, why: str) -> None:
        """A refusal that can pass: nothing more is sent for a while. The sends in flight with
        it come back refused too, within the same pause: one step of the back-off per pause."""
        if self.loop.time() < self._paused_until:
            return
        log.info("bridge %s: %s at %s answered %s; retrying in %.2f s", self.name, self.target,
                 self.remote.shown, why, self.retry_delay)
        self._pause(self.retry_delay)
        self.retry_delay = min(self.retry_delay * 2, RETRY_MAX_S)

    def _stored(self, ref, acked: bool):
        self.storing += 1

        def done(error: BaseException | None) -> None:
            self.storing -= 1
            if error is not None:  # still in the store, so on the queue again (sent again later)
                log.warning("bridge %s: outcome of message %s not stored: %s", self.name, ref.message.id, error)
                ref.queue.put_back(ref, acked)
            self.credit_changed()
        return done

    def _pause(self, seconds: float) -> None:
        self._paused_until = self.loop.time() + seconds
        self.loop.call_later(seconds, self.credit_changed)

    def down(self, reason: str) -> None:
        """The connection is over: the unconfirmed sends go back, a reconnect is scheduled."""
        self.connection = None
        self.consumer.credit = 0
        back, self.unconfirmed = list(self.unconfirmed), {}
        self.unconfirmed_bytes = 0
        for ref in back:
            if ref.consumer is self.consumer:
                ref.queue.release(ref)
        if self.state == STOPPED:
            return
        log.warning("bridge %s to %s: %s; reconnecting in %.1f s", self.name, self.remote.shown, reason, self.delay)
        self._set_state(BACKOFF, reason)
        self._timer = self.loop.call_later(self.delay, self._connect)
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)

    # -- the queue's consumer link -----------------------------------------------------------------
    def send(self, consumer, ref) -> None:
        """Called by the queue: forward one message, its bytes as they arrived."""
        data = ref.message.encoded
        self.unconfirmed[ref] = len(data)
        self.unconfirmed_bytes += len(data)
        self.connection.send(data, ref)
        if self.unconfirmed_bytes >= WINDOW_BYTES:
            consumer.credit = 0

    def queue_deleted(self, consumer) -> None:
        log.warning("bridge %s: queue %s was deleted; the bridge stops", self.name, consumer.queue.name)
        self.stop()
        self.last_error = f"queue {consumer.queue.name} was deleted"

    # -- what management shows -----------------------------------------------------------------------
    def status(self) -> dict:
        queue = self.consumer.queue if self.consumer is not None else None
        return {"name": self.name, "queue": queue.name if queue else self.cfg.queue,
                "remote": self.remote.shown, "address": self.target if queue else self.cfg.address,
                "state": self.state, "up": self.state == UP,
                "backlog": queue.message_count if queue else 0, "unconfirmed": len(self.unconfirmed),
                "forwarded": self.forwarded, "last_error": self.last_error}


def start_bridges(broker, loop) -> list[Bridge]:
    """Build, attach and start every [[bridge]]; BridgeError (one line) if one cannot start."""
    bridges = []
    context = None
    for i, cfg in enumerate(broker.config.bridges):
        remote = remote_for(cfg, f"bridge[{i}]")
        if remote.tls and context is None:
            try:
                context = client_context(broker.config.tls)
            except (OSError, ssl.SSLError) as e:
                raise BridgeError(f"tls.ca: cannot load {broker.config.tls.ca}: {e}") from None
        bridges.append(Bridge(broker, cfg, remote, loop, context if remote.tls else None))
    for bridge in bridges:
        bridge.attach()
    for bridge in bridges:
        bridge.start()
    return bridges



def bridge_rows(rows: list[dict]) -> list[str]:
    """`hermod queue stat` lines for the bridges (none without bridges): a header, then
    `bridge NAME QUEUE REMOTE ADDRESS STATE BACKLOG FORWARDED` and the last error, if any."""
    if not rows:
        return []
    lines = ["bridge name queue remote address state backlog forwarded last_error"]
    for r in rows:
        lines.append(f"bridge {r['name']} {r['queue']} {r['remote']} {r['address']} {r['state']} "
                     f"{r['backlog']} {r['forwarded']} {r['last_error'] or '-'}")
    return lines


__all__ = ["Bridge", "BridgeError", "bridge_rows", "start_bridges"]
