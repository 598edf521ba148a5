"""MQTT sessions: what a client id keeps between connections, and who holds it now.

One registry per broker (`sessions_of`). A second connection with the same client id takes the
session over: the first is closed (MQTT 5: DISCONNECT 0x8E) and its will published. A session
that persists (3.x clean session 0; 5.0 a session expiry interval above 0) keeps its
subscriptions as durable subscription queues, so QoS 1 and 2 messages wait for the client, and
after a broker restart it is found again from those queues (their `extra` carries the options).
Its inbound QoS 2 packet identifiers awaiting PUBREL are kept, so a PUBLISH the client resends
after reconnecting is answered, not delivered twice. Session expiry (5.0) deletes the queues.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ...core import links as core_links
from ...core.address import QueuePurpose
from . import qos2
from .subscriptions import EXTRA_KEY, Subscription

if TYPE_CHECKING:
    from .connection import MqttConnection

log = logging.getLogger("hermod.mqtt")

NEVER = 0xFFFFFFFF  # session expiry interval: the session never expires


class Session:
    def __init__(self, client_id: str, user: str | None) -> None:
        self.client_id = client_id
        self.user = user  # who made it: its durable queues are that user's
        self.expiry_s = 0  # 0: ends with its connection
        self.subscriptions: dict[str, Subscription] = {}
        self.awaiting_rel: set[int] = set()  # inbound QoS 2 packet ids: PUBREC sent, no PUBREL yet
        self.storing_rel: set[int] = set()  # inbound QoS 2 packet ids being stored (no PUBREC yet)
        self.releasing: list[int] = []  # outbound QoS 2: PUBREL sent, no PUBCOMP yet
        self.connection: MqttConnection | None = None
        self.expiry_timer: asyncio.TimerHandle | None = None
        self.will_timer: asyncio.TimerHandle | None = None

    @property
    def persistent(self) -> bool:
        return self.expiry_s > 0


class Sessions:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.by_id: dict[str, Session] = {}

    def find(self, client_id: str) -> Session | None:
        session = self.by_id.get(client_id)
        if session is None:
            session = self._recovered(client_id)
            if session is not None:
                self.by_id[client_id] = session
        return session

    def _recovered(self, client_id: str) -> Session | None:
        """A persistent session from before a restart: its durable subscription queues."""
        found: list[tuple[Any, dict]] = []
        for queue in list(self.broker.postoffice.queues.values()):
            options = queue.extra.get(EXTRA_KEY) if queue.extra else None
            if (isinstance(options, dict) and options.get("client") == client_id and queue.durable
                    and queue.purpose == QueuePurpose.SUBSCRIPTION):
                found.append((queue, options))
        owed = qos2.load(self.broker.postoffice, client_id)
        if not found and not owed:
            return None
        session = Session(client_id, found[0][0].extra.get("owner") if found else None)
        expiries = [o.get("expiry") for _, o in found]
        session.expiry_s = min((e for e in expiries if isinstance(e, int) and e > 0), default=NEVER)
        session.awaiting_rel = owed
        for queue, options in found:
            sub = Subscription.from_options(options)
            sub.session = session
            sub.queue = queue
            session.subscriptions[sub.filter] = sub
        return session

    def expire_recovered(self, loop: asyncio.AbstractEventLoop) -> None:
        """Persistent sessions from before a restart whose expiry is finite: counted from now
        (the store does not say when their client left)."""
        clients = set()
        for queue in list(self.broker.postoffice.queues.values()):
            options = queue.extra.get(EXTRA_KEY) if queue.extra else None
            if isinstance(options, dict) and queue.durable and isinstance(options.get("client"), str):
                expiry = options.get("expiry")
                if isinstance(expiry, int) and 0 < expiry < NEVER:
                    clients.add(options["client"])
        for client_id in clients:
            session = self.find(client_id)
            if session is not None and session.connection is None and session.expiry_timer is None:
                self.expire_later(session, loop)

    def end(self, session: Session) -> None:
        """The session is over: its subscriptions (and their queues) go."""
        if self.by_id.get(session.client_id) is session:
            del self.by_id[session.client_id]
        for timer in (session.expiry_timer, session.will_timer):
            if timer is not None:
                timer.cancel()
        po = self.broker.postoffice
        for sub in list(session.subscriptions.values()):
            drop_subscription(po, session, sub)
        session.subscriptions.clear()
        if session.awaiting_rel and po.queues.get(qos2.STATE) is not None:
            qos2.save(po, session.client_id, set(), _logged)
        session.awaiting_rel.clear()

    def expire_later(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        if session.expiry_s == 0:
            self.end(session)
        elif session.expiry_s != NEVER:
            session.expiry_timer = loop.call_later(session.expiry_s, self._expired, session)

    def _expired(self, session: Session) -> None:
        session.expiry_timer = None
        if session.connection is None:
            log.info("MQTT session %s expired", session.client_id)
            self.end(session)


def drop_subscription(po, session: Session, sub: Subscription) -> None:
    """Unsubscribe: detach its consumer and delete its queue (a shared queue only with its last
    consumer, when it does not persist)."""
    session.subscriptions.pop(sub.filter, None)
    consumer, sub.consumer = sub.consumer, None
    if consumer is not None:
        core_links.detach_consumer(po, consumer, unsubscribe=sub.group is None)
        return
    if sub.group is None:  # the session's own queue, kept while it was away
        name = f"{session.client_id}.{sub.pattern}"
        queue = po.queues.get(name)
        if queue is not None and not queue.consumers and queue.durable:
            po.delete_queue(name)


def _logged(error: BaseException | None) -> None:
    if error is not None:
        log.warning("QoS 2 state of an ended MQTT session not cleared: %s", error)


def sessions_of(broker, loop: asyncio.AbstractEventLoop) -> Sessions:
    """The broker's MQTT session registry (made on first use, when the sessions a restart
    found start counting down their expiry)."""
    registry = getattr(broker, "mqtt_sessions", None)
    if registry is None:
        registry = Sessions(broker)
        broker.mqtt_sessions = registry
        registry.expire_recovered(loop)
    return registry


__all__ = ["NEVER", "Session", "Sessions", "drop_subscription", "sessions_of"]
