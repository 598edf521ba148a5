"""One topic filter of a session, as a consumer of a core queue.

A filter maps to an address pattern (`sport/tennis/+` -> `sport.tennis.*`, contract "Names").
A session that persists subscribes with a durable subscription queue `CLIENTID.<pattern>`
(resumable over AMQP by container id CLIENTID and link name `<pattern>`); a clean session with a
queue of its own that goes with the connection; `$share/GROUP/FILTER` with the shared queue
GROUP on the pattern's address (competing consumers; AMQP reaches it as `ADDRESS::GROUP`).
The subscription options travel in the queue's `extra` (key `mqtt`), so a persistent session
is found again after a restart.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core import links as core_links
from ...core.message import MULTICAST
from ...mqtt.topics import filter_to_pattern, parse_shared
from ...protocol.terminus import subscription_queue_name

if TYPE_CHECKING:
    from .sessions import Session

EXTRA_KEY = "mqtt"


@dataclass(eq=False)
class Subscription:
    """The core's `link` for one consumer: `send` hands the message to the connection."""
    filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    identifier: int | None = None
    session: Session | None = None
    consumer: Any = None
    durable: bool | None = None  # its queue persists: fixed when first subscribed, kept on resume
    queue: Any = None  # the core queue it last consumed from

    def __post_init__(self) -> None:
        shared = parse_shared(self.filter)
        self.group = shared.group if shared is not None else None
        inner = shared.filter if shared is not None else self.filter
        self.pattern = filter_to_pattern(inner)
        # A filter starting with a wildcard never matches a topic starting with `$`.
        self.dollar_guard = inner[:1] in ("+", "#")

    # -- the core's link interface ---------------------------------------------------------------
    def send(self, consumer, ref) -> None:
        session = self.session
        conn = session.connection if session is not None else None
        if conn is None or conn.outbox is None:
            ref.queue.release(ref)
            consumer.credit = 0
            return
        conn.outbox.deliver(self, consumer, ref)

    def queue_deleted(self, consumer) -> None:
        self.consumer = None
        session = self.session
        if session is not None and session.subscriptions.get(self.filter) is self:
            del session.subscriptions[self.filter]
            if session.connection is not None and session.connection.outbox is not None:
                outbox = session.connection.outbox
                if self in outbox.subscriptions:
                    outbox.subscriptions.remove(self)

    # -- the queue -------------------------------------------------------------------------------
    def queue_options(self) -> dict | None:
        """The options recorded with its durable queue (to keep them in step), or None."""
        queue = self.queue
        if queue is None or not queue.durable or queue.deleted:
            return None
        options = queue.extra.get(EXTRA_KEY)
        return options if isinstance(options, dict) else None
    def options(self) -> dict:
        return {"filter": self.filter, "qos": self.qos, "nl": self.no_local, "rap": self.retain_as_published,
                "rh": self.retain_handling, "id": self.identifier}

    @classmethod
    def from_options(cls, options: dict) -> Subscription:
        return cls(str(options["filter"]), int(options.get("qos", 1)), bool(options.get("nl")),
                   bool(options.get("rap")), int(options.get("rh", 0)), options.get("id"), durable=True)

    def request(self, client_id: str, persistent: bool, user: str | None,
                expiry: int | None = None) -> core_links.ConsumerRequest:
        """The core's consumer request for this filter of `client_id`'s session."""
        if self.durable is None:
            self.durable = persistent
        persistent = self.durable
        if self.group is not None:
            name = self.group
        elif persistent:
            name = subscription_queue_name(client_id, self.pattern, shared=False, global_=False, durable=True)
        else:
            name = None
        return core_links.ConsumerRequest(
            self.pattern, MULTICAST, subscription_queue=name, durable=persistent,
            shared=self.group is not None, no_local_container=client_id if self.no_local else None,
            user=user, extra={EXTRA_KEY: {**self.options(), "client": client_id, "expiry": expiry}} if persistent
            else None)


__all__ = ["EXTRA_KEY", "Subscription"]
