"""ConsumerLink: a link a client receives messages on; the core's queue calls `send` or
`send_run` (consumer_send.py); its attach is in consumer_attach.py. Here: the outcomes the
client sends back, and the link's life.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import ffi, lib
# The per-message calls bound by name (why: connection.py).
from cproton_ffi.lib import (pn_delivery_remote_state, pn_delivery_settle, pn_delivery_settled,
                             pn_delivery_updated)

from ..core import links as core_links
from ..core.message import Message
from . import codec, codec_edits, conditions, coordinator, recovery
from .conditions import set_condition
from .consumer_attach import ConsumerAttach
from .consumer_send import ConsumerSend
from .handler import LinkHandler

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("hermod.link")

PN_ACCEPTED, PN_REJECTED, PN_RELEASED, PN_MODIFIED = (lib.PN_ACCEPTED, lib.PN_REJECTED,
                                                      lib.PN_RELEASED, lib.PN_MODIFIED)
TRANSACTIONAL_STATE = coordinator.TRANSACTIONAL_STATE  # [transactions]
_UNTRACKED = object()  # a delivery `deliveries` does not know (None there means a browser's)


class ConsumerLink(ConsumerSend, ConsumerAttach, LinkHandler):
    """A link the client receives messages on; the core's queue calls `send`."""

    after_transfers = False  # dispositions do not depend on transfers in the same batch

    __slots__ = ("conn", "link", "consumers", "broker", "presettled", "deliveries", "_tag", "_tag_ptr", "_tag_n",
                 "_tag_bytes", "_tag_arg",
                 "active", "opened", "browser", "durable_subscription", "name",
                 "subscription", "committing", "expiry", "jms", "keeps_state", "_acks", "_acks_queue",
                 "_stored_acks", "_stored_queue")

    def __init__(self, conn: Connection, link):
        self.conn = conn
        self.link = link
        self.broker = conn.broker
        self.consumers: list = []  # one, or one per part of a client-side composite source
        self.presettled = lib.pn_link_remote_snd_settle_mode(link) == lib.PN_SND_SETTLED
        self.deliveries: dict = {}  # pn_delivery_t* -> Ref
        # Deliveries whose acknowledgement (or rejection) is being stored: only the store's
        # answer settles them. Settling one earlier (the peer settles again) would let Proton
        # free it under the pending callback.
        self.committing: set = set()
        self._acks: list = []  # refs accepted in this batch of events, all of `_acks_queue`
        self._acks_queue = None
        # Accepted durable messages of this batch of events, all of `_stored_queue`: (delivery,
        # ref). Their deletes go to the store as one unit, settled together once it commits.
        self._stored_acks: list = []
        self._stored_queue = None
        self.active = True  # False once detached: late store completions must not touch the link
        self.opened = False  # the attach is answered (after the store has its new queues)
        self._tag = ffi.new("uint64_t[1]")
        self._tag_ptr = ffi.cast("char *", self._tag)
        # The tag as the pn_bytes_t pn_delivery takes, built once: cffi converts a (size, ptr)
        # tuple to the struct on every call (~60 ns of a ~0.7 us send, measured alone).
        self._tag_bytes = ffi.new("pn_bytes_t *", (8, self._tag_ptr))
        self._tag_arg = self._tag_bytes[0]
        self._tag_n = 0
        self.browser = False
        self.durable_subscription = False
        self.name = cproton.pn_link_name(link)
        # The durable subscription this link's own terminus names (container id + link name);
        # only closing this link ends it. None for readers by FQQN and everything else.
        self.subscription: str | None = None
        # The source's expiry policy and timeout (s): how long a temporary queue or non-durable
        # subscription this link leaves without a consumer is kept for a re-attach.
        self.expiry = ("session-end", 0)
        self.jms = False  # a qpid-jms client: messages get the JMS mapping's destination annotations
        # Its source is durable `unsettled-state`: unsettled deliveries are remembered at a
        # detach for a re-attach that recovers the link (protocol.recovery).
        self.keeps_state = False

    def on_delivery(self, d) -> None:
        """The client's disposition for a message we sent. `accepted` on a tracked delivery,
        nearly every disposition under load, is read with one question to the engine (a
        remote state is only there once the delivery was updated); the rest in `_untracked`
        and `_outcome`. T4: one cffi call less per acknowledgement."""
        deliveries = self.deliveries
        ref = deliveries.get(d, _UNTRACKED)
        if ref is _UNTRACKED or ref is None:
            self._untracked(d, ref)
            return
        state = pn_delivery_remote_state(d)
        if state != PN_ACCEPTED:
            settled = pn_delivery_settled(d)
            if not settled and not pn_delivery_updated(d):
                return
            if state or not settled:
                self._outcome(d, ref, state, settled)
                return
            # settled with no outcome: accepted, the default outcome
        del deliveries[d]
        queue = ref.queue
        if queue.host.retaining and not queue.stores_nothing_for(ref):
            self._until_stored(queue.acknowledge, ref, self._settler(d, ref, acked=True))
            return
        if ref.durable:
            self._stored_ack(d, ref, queue)
            return
        # Nothing to store (a non-durable message): settled here, no completion to wait
        # for (Connection.process marks the connection). Q1, 100k x 1 KiB, memory store:
        # with the idle-check reorder, 1.69 -> 1.53 broker CPU s per 100k (medians of 3,
        # interleaved, load 2.1-2.4). The queue hears of it once per batch of the
        # connection's events (`take_acks`), before anything else the batch holds.
        pn_delivery_settle(d)
        acks = self._acks
        if queue is not self._acks_queue:  # one queue per batch (a composite source has several)
            if acks:
                self.take_acks()
                acks = self._acks
            self._acks_queue = queue
        if not acks:
            self.conn.acking.append(self)
        acks.append(ref)

    def _untracked(self, d, ref) -> None:
        """A disposition for a delivery `deliveries` does not know (`ref` _UNTRACKED) or that
        a browser got (`ref` None)."""
        settled = pn_delivery_settled(d)
        if not settled and not pn_delivery_updated(d):
            return
        if ref is _UNTRACKED:
            if d in self.committing:
                return  # settled when its acknowledgement is stored
            if settled:
                if self.conn.transactions is not None:  # [transactions] one a transaction holds?
                    self.conn.transactions.forget(self, d)
                pn_delivery_settle(d)
            return
        if settled or pn_delivery_remote_state(d):  # browsing: nothing happens to the queue
            del self.deliveries[d]
            pn_delivery_settle(d)

    def _outcome(self, d, ref, state: int, settled: bool) -> None:
        """Any outcome but `accepted` (see on_delivery)."""
        queue = ref.queue
        if state == PN_RELEASED:
            del self.deliveries[d]
            queue.release(ref)
        elif state == PN_MODIFIED:
            del self.deliveries[d]
            disp = lib.pn_delivery_remote(d)
            queue.release(ref, failed=bool(lib.pn_disposition_is_failed(disp)),
                          undeliverable=bool(lib.pn_disposition_is_undeliverable(disp)),
                          annotated=self._annotated(ref.message, lib.pn_disposition_annotations(disp)))
        elif state == PN_REJECTED:
            del self.deliveries[d]
            self._until_stored(queue.reject, ref, self._settler(d, ref, acked=False))
            return
        elif state == TRANSACTIONAL_STATE:  # [transactions] acknowledged and settled at commit
            self._acquire_in_transaction(d, ref, settled)
            return
        else:
            return  # e.g. a received state: not terminal
        pn_delivery_settle(d)

    def _stored_ack(self, d, ref, queue) -> None:
        """An accepted durable message: kept for this batch of events (`take_acks`), settled
        once the batch's deletes are stored."""
        self.committing.add(d)
        stored = self._stored_acks
        if queue is not self._stored_queue:  # one queue per batch, as for `_acks`
            if stored:
                self._take_stored_acks()
                stored = self._stored_acks
            self._stored_queue = queue
        if not stored and not self._acks:
            self.conn.acking.append(self)
        stored.append((d, ref))

    def take_acks(self) -> None:
        """Hand the acknowledgements read since the last call to their queue, as one batch
        (Connection.process calls it before the next endpoint event and at the end of each
        batch of engine events)."""
        acks = self._acks
        if acks:
            self._acks = []
            self._acks_queue.acknowledge_batch(acks)
        if self._stored_acks:
            self._take_stored_acks()

    def _take_stored_acks(self) -> None:
        """The durable acknowledgements of this batch of events: one store unit for their
        deletes, one hold of the connection's output (taken before any output after them is,
        as the batch ends before the connection is flushed or an endpoint event handled), and
        one completion that settles them all. Before, each had its own unit, completion closure
        and hold: Q1D (SQLite FULL, 60k x 1 KiB) 2.98 -> 2.55 broker CPU s per 100k, 40.1k ->
        46.8k msg/s (medians of 3, interleaved, load 0.2-0.3)."""
        batch, self._stored_acks = self._stored_acks, []
        conn = self.conn
        state = [False, 0]  # completed, the hold's epoch (0: none)

        def done(error: BaseException | None) -> None:
            state[0] = True
            try:
                self._settle_stored(batch, error)
            finally:
                if state[1]:
                    conn.release_store_hold(state[1])

        self._stored_queue.acknowledge_batch([ref for _, ref in batch], done)
        if not state[0]:  # on its way to the store
            state[1] = conn.hold_for_store()

    def _settle_stored(self, batch: list, error: BaseException | None) -> None:
        committing = self.committing
        for d, _ in batch:
            committing.discard(d)
        if error is not None:
            # Not committed: the messages are still in the store, so they stay on the queue
            # and the deliveries stay unsettled (the client must not take them as final).
            log.warning("acknowledgement of %d message(s) on %s not stored: %s", len(batch),
                        batch[0][1].queue.name, error)
            for _, ref in batch:
                ref.queue.put_back(ref, True)
            return
        if self.active:
            for d, _ in batch:
                pn_delivery_settle(d)
            self.conn.server.mark(self.conn)

    def _acquire_in_transaction(self, d, ref, settled: bool) -> None:
        """[transactions] A `transactional-state` disposition: the transaction takes the
        delivery when it is `{txn, accepted}`; a settled one it cannot take (unknown
        transaction, another outcome) gives the message back to its queue."""
        txns = self.conn.transactions
        if txns is not None and txns.acquire(self, d, ref, settled):
            del self.deliveries[d]
            if settled:
                lib.pn_delivery_settle(d)
        elif settled:
            del self.deliveries[d]
            ref.queue.release(ref)
            lib.pn_delivery_settle(d)

    def keep(self, d, ref) -> None:
        """A delivery a rolled-back transaction leaves with its consumer: unsettled, and this
        link's to settle again."""
        if self.active:
            self.deliveries[d] = ref
            self.conn.server.mark(self.conn)

    def _annotated(self, message: Message, annotations) -> Message | None:
        """The message with a modified outcome's message-annotations merged in (AMQP 1.0
        §3.4.5: they are to be applied to the message as it goes back); None without any.
        Annotations that would make the message unreadable are left out, with a log line."""
        size = lib.pn_data_encoded_size(annotations)
        if size <= 0:
            return None
        buf = ffi.new("char[]", size)
        if lib.pn_data_encode(annotations, buf, size) != size:
            return None
        try:
            merged = codec_edits.with_merged_annotations(message.encoded, message.envelope, ffi.unpack(buf, size))
        except codec.DecodeError as e:
            log.info("modified outcome on %s: annotations not applied (%s)", self.name, e)
            return None
        if merged is None:
            return None
        encoded, envelope = merged
        return Message(encoded, envelope, message.address, message.routing_type, message.container_id,
                       message.arrival)

    def _until_stored(self, outcome, ref, settle) -> None:
        """Apply a client's acknowledgement (or rejection) and, while the store commits it,
        hold the connection's answers: nothing the broker says after the client settled may
        reach it before the settlement is stored (contract, "Delivery guarantees"): not the
        answer to a close, not a later round trip. The connection keeps reading meanwhile."""
        conn = self.conn
        state = [False, 0]  # completed, the hold's epoch (0: none)

        def done(error: BaseException | None) -> None:
            state[0] = True
            try:
                settle(error)
            finally:
                if state[1]:
                    conn.release_store_hold(state[1])

        outcome(ref, done)
        if not state[0]:  # on its way to the store
            state[1] = conn.hold_for_store()

    def _settler(self, d, ref, acked: bool):
        self.committing.add(d)

        def settle(error: BaseException | None) -> None:
            self.committing.discard(d)
            if error is not None:
                # Not committed: the message is still in the store, so it stays on the queue
                # and the delivery stays unsettled (the client must not take it as final).
                log.warning("acknowledgement of message %s on %s not stored: %s", ref.message.id,
                            ref.queue.name, error)
                ref.queue.put_back(ref, acked)
                return
            # The acknowledgement is committed: only now may the delivery be forgotten.
            if self.active:
                lib.pn_delivery_settle(d)
                self.conn.server.mark(self.conn)
        return settle

    def settle(self, d, outcome: int | None = None, condition: str | None = None,
               description: str = "") -> None:
        """Settle a delivery we sent whose fate was decided elsewhere (a transaction's
        discharge); it is no longer tracked here."""
        self.deliveries.pop(d, None)
        if not self.active:
            return  # the link is gone, and its deliveries with it
        if outcome is not None and not lib.pn_delivery_settled(d):
            if condition is not None:
                set_condition(lib.pn_disposition_condition(lib.pn_delivery_local(d)), condition, description)
            lib.pn_delivery_update(d, outcome)
        lib.pn_delivery_settle(d)
        self.conn.server.mark(self.conn)

    def on_flow(self) -> None:
        if not self.opened:
            return  # taken up when the attach is answered
        credit = lib.pn_link_credit(self.link)
        if lib.pn_link_get_drain(self.link):
            self.conn.server.draining.add(self)
        for consumer in self.consumers:
            consumer.credit = credit
            consumer.queue.host.schedule(consumer.queue)

    def drained(self) -> None:
        if self.consumers and self.active:
            lib.pn_link_drained(self.link)
            for consumer in self.consumers:
                consumer.credit = 0
            self.conn.server.mark(self.conn)

    def set_blocked(self, blocked: bool) -> None:
        for consumer in self.consumers:
            consumer.blocked = blocked
            if not blocked:
                consumer.queue.host.schedule(consumer.queue)

    def queue_deleted(self, consumer) -> None:
        """The queue went away under this consumer: close the link with resource-deleted."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if self.consumers or not self.active:
            return
        self.active = False
        self.deliveries.clear()
        self.conn.links.pop(self.link, None)
        set_condition(lib.pn_link_condition(self.link), conditions.RESOURCE_DELETED,
                      f"queue {consumer.queue.name} was deleted")
        lib.pn_link_close(self.link)
        self.conn.server.mark(self.conn)

    def on_detach(self, closed: bool, session_end: bool = False) -> None:
        """Only this link closing (closed=true) ends the durable subscription its terminus
        names. What was in flight counts as a delivery attempt when the connection failed."""
        self.take_acks()  # what the client accepted before it left is acknowledged
        self.active = False
        consumers, self.consumers = self.consumers, []
        self.conn.frame_tap.forget(self.name)
        if self.keeps_state and not closed and self.deliveries:
            principal = self.conn.principal
            recovery.memory_of(self.broker).consumer_detached(
                self.link_key, principal.name if principal is not None else None, self._tag_n,
                {recovery.delivery_tag(d): ref for d, ref in self.deliveries.items() if ref is not None})
        self.deliveries.clear()
        self.committing.clear()  # the engine frees the link's deliveries; callbacks see active
        attempted = session_end and self._connection_failed()
        unsubscribing = closed and self.subscription is not None
        if unsubscribing and self.broker.permissions.enabled:
            denial = next(filter(None, (self.broker.subscription_delete_denial(self.conn.principal, c.queue)
                                        for c in consumers if c.queue.name == self.subscription)), None)
            if denial is not None:  # the subscription stays; the client is told why
                unsubscribing = False
                set_condition(lib.pn_link_condition(self.link), conditions.UNAUTHORIZED_ACCESS, denial)
        for consumer in consumers:
            consumer.link = _Gone
            unsubscribe = unsubscribing and consumer.queue.name == self.subscription
            kept = core_links.detach_consumer(self.broker.postoffice, consumer, unsubscribe=unsubscribe,
                                              attempted=attempted, keep=not closed, link_key=self.link_key)
            if kept is not None:
                self._expire_later(kept, session_end)

    @property
    def link_key(self) -> tuple[str, str]:
        """What finds this link's non-durable subscription again: container id and link name."""
        return (self.conn.container_id or "", self.name)

    def _expire_later(self, queue, session_end: bool) -> None:
        """The link detached without closing and left `queue` without a consumer: it is kept
        until its expiry policy's moment plus its timeout (§3.5.3), unless resumed before."""
        policy, timeout = self.expiry
        lingering = self.broker.postoffice.lingering
        self.conn.expiry_waits.detached(policy, lib.pn_link_session(self.link), session_end,
                                        lambda: lingering.expire_in(queue, timeout * 1000))

    def _connection_failed(self) -> bool:
        """The link went with its connection without the client ending it: no close or end
        from the peer (a dropped socket, an expired idle timeout, a framing error), and not
        the broker stopping."""
        conn = self.conn
        if conn.conn is None or conn.server._stopping.is_set():
            return False
        if lib.pn_connection_state(conn.conn) & lib.PN_REMOTE_CLOSED:
            return False
        return not lib.pn_session_state(lib.pn_link_session(self.link)) & lib.PN_REMOTE_CLOSED


class _GoneLink:
    """Stands in for a detached link so late callbacks find nothing to do."""

    def send(self, consumer, ref) -> None:  # pragma: no cover - queue removes consumers first
        raise RuntimeError("send on a detached link")

    def queue_deleted(self, consumer) -> None:
        pass


_Gone = _GoneLink()
