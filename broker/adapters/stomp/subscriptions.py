"""SUBSCRIBE, UNSUBSCRIBE, ACK and NACK for one connection (contract, "Subscriptions").

A subscription attaches a consumer through `Broker.attach_consumer` inside `acting_as` (the one
decision: `consume`, or `browse` for `browser: true`; auto-creation; ownership of a durable
subscription). A durable subscription (`activemq.subscriptionName` or `durable-subscription-name`,
with the connection's `client-id`) is the queue CLIENTID.NAME, the name an AMQP container
CLIENTID resumes with link NAME. ACK and NACK name the message by the MESSAGE's `ack` header
(1.2) or its `message-id` (1.0, 1.1; 1.1 adds `subscription`). A NACK counts a failed delivery
attempt (`max_delivery_attempts` decides, then the dead-letter address)."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from ...core import errors, limits
from ...core import links as core_links
from ...core.message import MULTICAST
from ...protocol.terminus import subscription_queue_name
from ...stomp import Frame, StompError
from .answers import HANDLED
from .destinations import targets
from .subscription import ACK_MODES, AUTO, CLIENT, DEFAULT_PREFETCH, MAX_PREFETCH, Pending, Subscription

if TYPE_CHECKING:
    from ...core.consumer import Consumer, Ref
    from .connection import StompConnection

MAX_SUBSCRIPTIONS = 1000  # per connection


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def durable_name(frame: Frame) -> str | None:
    return frame.header("activemq.subscriptionName") or frame.header("durable-subscription-name") \
        or frame.header("durable-subscriber-name")


class Subscriptions:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.by_id: dict[str, Subscription] = {}
        self.pending: dict[str, list[Pending]] = {}  # ack key -> messages awaiting it
        self.pending_by_seq: dict[int, Pending] = {}
        self._seq = itertools.count(1)
        self._ack_ids = itertools.count(1)

    # -- SUBSCRIBE ----------------------------------------------------------------------------------
    def subscribe(self, frame: Frame) -> object:
        conn = self.conn
        raw = frame.header("destination")
        sid = frame.header("id")
        if sid is None:
            if conn.version != "1.0":
                raise StompError("SUBSCRIBE needs an id header")
            sid = raw or ""
        if sid in self.by_id:
            raise errors.IllegalState(f"subscription id {sid!r} is already in use on this connection")
        if len(self.by_id) >= MAX_SUBSCRIPTIONS:
            raise errors.ResourceLimitExceeded(f"more than {MAX_SUBSCRIPTIONS} subscriptions on one connection")
        ack = (frame.header("ack") or AUTO).strip()
        if ack not in ACK_MODES:
            raise StompError(f"ack must be auto, client or client-individual, not {ack[:40]!r}")
        window = self._window(frame)
        browser = _flag(frame.header("browser"))
        selector = frame.header("selector")
        limits.check_selector(selector)
        broker = conn.broker
        predicate = broker.compile_consumer_selector(selector) if selector else None
        found = targets(conn, raw, frame.header("destination-type"), frame.header("subscription-type"))
        name = durable_name(frame)
        client_id = frame.header("client-id") or conn.client_id
        durable_queue = None
        if name is not None and not browser:
            if not client_id:
                raise errors.InvalidField("a durable subscription needs the connection's client-id")
            if len(found) != 1 or found[0].routing == "anycast":
                raise errors.InvalidField("a durable subscription is on one topic")
            durable_queue = subscription_queue_name(client_id, name, shared=False, global_=False, durable=True)
        priority = frame.header("activemq.priority")
        user = conn.principal.name if conn.principal is not None else None
        sub = Subscription(conn, sid, raw or "", ack, window, browser, durable_queue)
        try:
            with broker.authorization.recording() as held, broker.acting_as(conn.principal):
                for t in found:
                    req = core_links.ConsumerRequest(
                        t.address, MULTICAST if durable_queue else t.routing, t.queue, browser=browser,
                        selector=selector, selector_predicate=predicate,
                        priority=int(priority) if priority and priority.strip().lstrip("-").isdigit() else 0,
                        subscription_queue=durable_queue, durable=durable_queue is not None,
                        exclusive=_flag(frame.header("activemq.exclusive")), user=user)
                    consumer = self._attach(req, sub, t.temporary)
                    consumer.blocked = not conn.writable
                    sub.consumers.append(consumer)
        except BaseException:
            sub.close()
            raise
        sub.held = tuple(held)
        self.by_id[sid] = sub
        sub.refill()
        return self._answer_when_stored(sub, frame)

    def _answer_when_stored(self, sub: Subscription, frame: Frame) -> object:
        """The RECEIPT of a SUBSCRIBE that created a durable queue waits for the store: a client
        told its durable subscription exists must find it after a crash (as an AMQP attach)."""
        waiting = {id(c.queue): c.queue for c in sub.consumers if not c.queue.persisted}
        if not waiting:
            return None
        conn = self.conn
        slot = conn.answers.reserve()
        receipt = frame.header("receipt")

        def stored(queue, error: BaseException | None) -> None:
            if error is not None:
                conn.fail(error, frame, slot)
                return
            waiting.pop(id(queue), None)
            if not waiting:
                conn.answers.fill(slot, conn.receipt(receipt) if receipt is not None else None)

        for queue in list(waiting.values()):
            queue.when_persisted(stored)
        return HANDLED

    def _attach(self, req: core_links.ConsumerRequest, sub: Subscription, own_temporary: bool) -> Consumer:
        conn = self.conn
        if own_temporary:  # the connection's own temporary destination: no decision, as a dynamic node
            return core_links.attach_consumer(conn.broker.postoffice, req, sub, owner=conn)
        return conn.broker.attach_consumer(req, sub, owner=conn)

    @staticmethod
    def _window(frame: Frame) -> int:
        raw = frame.header("activemq.prefetchSize") or frame.header("consumer-window-size")
        if raw is None:
            return DEFAULT_PREFETCH
        try:
            value = int(raw.strip())
        except ValueError:
            raise StompError(f"activemq.prefetchSize must be a number, not {raw[:40]!r}") from None
        if value <= 0:  # Classic's 0 means pull; STOMP has no pull: one at a time
            return 1
        return min(value, MAX_PREFETCH)

    # -- UNSUBSCRIBE --------------------------------------------------------------------------------
    def unsubscribe(self, frame: Frame) -> None:
        conn = self.conn
        sid = frame.header("id")
        if sid is None and conn.version == "1.0":
            sid = frame.header("destination")
        name = durable_name(frame)
        sub = self.by_id.get(sid) if sid is not None else None
        if sub is None and name is None:
            raise errors.IllegalState(f"no subscription {sid!r} on this connection")
        queue_name = sub.durable_queue if sub is not None else None
        if name is not None:
            client_id = frame.header("client-id") or conn.client_id
            if not client_id:
                raise errors.InvalidField("removing a durable subscription needs the connection's client-id")
            queue_name = subscription_queue_name(client_id, name, shared=False, global_=False, durable=True)
        po = conn.broker.postoffice
        queue = po.queues.get(queue_name) if name is not None and queue_name else None
        if queue is not None:
            core_links.check_owner(po, queue, conn.principal.name if conn.principal is not None else None)
            denial = conn.broker.subscription_delete_denial(conn.principal, queue)
            if denial is not None:
                raise errors.NotAuthorized(denial)
        if sub is not None:
            self.forget(sub)
            sub.close(unsubscribe=queue is not None)
        if queue is not None and not queue.deleted:
            if queue.consumers:
                raise errors.IllegalState(f"durable subscription {queue.name} has a consumer elsewhere")
            po.delete_queue(queue.name)

    def forget(self, sub: Subscription) -> None:
        """`sub` leaves the connection: its unacknowledged messages are no longer awaited."""
        self.by_id.pop(sub.id, None)
        for p in sub.unacked.values():
            self._untrack(p)

    # -- delivery bookkeeping -----------------------------------------------------------------------
    def ack_key(self, message_id: str) -> str:
        """The key a client acknowledges a MESSAGE by: a fresh `ack` id in 1.2, else the
        message-id (the only name 1.0 and 1.1 ACK frames carry)."""
        return str(next(self._ack_ids)) if self.conn.version == "1.2" else message_id

    def track(self, key: str, sub: Subscription, ref: Ref, consumer: Consumer) -> int:
        seq = next(self._seq)
        p = Pending(key, sub, ref, consumer, seq)
        self.pending.setdefault(key, []).append(p)
        self.pending_by_seq[seq] = p
        return seq

    def _untrack(self, p: Pending) -> None:
        self.pending_by_seq.pop(p.seq, None)
        same = self.pending.get(p.key)
        if same is not None:
            try:
                same.remove(p)
            except ValueError:
                pass
            if not same:
                del self.pending[p.key]

    # -- ACK / NACK ---------------------------------------------------------------------------------
    def settle(self, frame: Frame, nack: bool) -> object:
        """ACK (or NACK) the message the frame names; HANDLED when the receipt waits for the store."""
        conn = self.conn
        key = frame.header("id") if conn.version == "1.2" else frame.header("message-id")
        if key is None:
            raise StompError(f"{frame.command} needs {'an id' if conn.version == '1.2' else 'a message-id'} header")
        sid = frame.header("subscription") if conn.version != "1.2" else None
        pick = next((p for p in self.pending.get(key, ()) if sid is None or p.sub.id == sid), None)
        if pick is None:
            raise errors.IllegalState(f"no message {key!r} awaits an acknowledgement on this connection")
        sub = pick.sub
        if sub.ack == CLIENT:
            chosen = [p for seq, p in sub.unacked.items() if seq <= pick.seq]
        else:
            chosen = [pick]
        txn = conn.transactions.named(frame.header("transaction"))
        for p in chosen:
            del sub.unacked[p.seq]
            self._untrack(p)
        live = [p for p in chosen if p.ref.consumer is p.consumer and not p.ref.queue.deleted]
        handled = None
        if nack:
            for p in live:
                p.ref.queue.release(p.ref, failed=True)
        elif txn is not None:
            for p in live:
                txn.acquire(p.ref, None, settled=True)
        else:
            handled = self._acknowledge(live, frame.header("receipt"))
        sub.refill()
        return handled

    def _acknowledge(self, chosen: list[Pending], receipt: str | None) -> object:
        """Acknowledge; a durable message's deletion is stored before any later answer."""
        conn = self.conn
        durable = [p for p in chosen if p.ref.durable]
        for p in chosen:
            if not p.ref.durable:
                p.ref.queue.acknowledge(p.ref)
        if not durable:
            return None
        slot = conn.answers.reserve()
        remaining = [len(durable)]

        def stored(error: BaseException | None) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                conn.answers.fill(slot, conn.receipt(receipt) if receipt is not None else None)

        for p in durable:
            p.ref.queue.acknowledge(p.ref, stored)
        return HANDLED

    # -- the connection's end -----------------------------------------------------------------------
    def close_all(self, attempted: bool) -> None:
        for sub in list(self.by_id.values()):
            sub.close(attempted=attempted)
        self.by_id.clear()
        self.pending.clear()
        self.pending_by_seq.clear()

    def revalidate(self) -> int:
        """After a reload: the first subscription whose rights (`consume`, `browse` on what its
        SUBSCRIBE was allowed) no longer hold ends the connection with an ERROR (STOMP has no
        way to end one subscription alone). 1 if so, else 0."""
        conn = self.conn
        authorization = conn.broker.authorization
        for sub in self.by_id.values():
            for operation, address in sub.held:
                denial = authorization.denial(conn.principal, operation, address, via="reload", peer=conn.peer)
                if denial is not None:
                    conn.fail(errors.NotAuthorized(denial))
                    return 1
        return 0

    def set_blocked(self, blocked: bool) -> None:
        for sub in self.by_id.values():
            sub.set_blocked(blocked)

    def describe(self) -> list[dict]:
        """Each subscription as /api/connections lists an AMQP link (the client's role: receiver)."""
        out = []
        for sub in self.by_id.values():
            consumers = sub.consumers
            out.append({"name": sub.id, "role": "receiver",
                        "address": ",".join(f"{c.queue.address.name}::{c.queue.name}" for c in consumers) or None,
                        "credit": max((c.credit for c in consumers), default=0), "unsettled": len(sub.unacked),
                        "filter": next((c.selector_text for c in consumers if c.selector_text), None),
                        "browser": sub.browser, "destination": sub.destination, "ack": sub.ack})
        return out
