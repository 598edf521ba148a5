"""ProducerLink: a link a client sends messages on. Attach is the cold path (Proton data
objects are fine there); the per-message path (`on_delivery`, `receive`) uses only `lib.pn_*`
calls on raw pointers and keeps each message as its encoded bytes.
"""
from __future__ import annotations

import logging
from time import time as wall_clock
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import ffi, lib
# The per-message calls bound by name (why: connection.py).
from cproton_ffi.lib import (pn_delivery_aborted, pn_delivery_partial, pn_delivery_pending, pn_delivery_remote_state,
                             pn_delivery_settle, pn_delivery_settled, pn_delivery_update, pn_link_advance,
                             pn_link_credit, pn_link_current, pn_link_queued, pn_link_recv)

from ..core import links as core_links
from ..core.bursts import Burst
from ..core.flow import DROP, FAIL, Unfinished
from ..core.message import ANYCAST, MULTICAST, Message
from . import codec, conditions, coordinator, recovery
from .conditions import set_condition
from .handler import LinkHandler
from .producer_routes import ProducerRoutes, routing_type_annotation
from .terminus import parse_name, read_terminus, split_composite
from .codec import Envelope
from .transfers import SCRATCH_SIZE, receive_bytes, scratch

unpack = ffi.unpack

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("hermod.link")

# Producer credit (Artemis): a window of 1000, topped up when it falls to 300. Transfers waiting
# for the store hold their credit until their unit commits (settled at the sender or not), and
# the credit comes out of the journal budget (core.flow.JOURNAL_BUDGET_UNITS): a grant of less
# than PRODUCER_CREDIT_LOW waits for more room rather than send a trickle of small flows.
PRODUCER_CREDIT = 1000
PRODUCER_CREDIT_LOW = 300

PN_ACCEPTED, PN_REJECTED = lib.PN_ACCEPTED, lib.PN_REJECTED
TRANSACTIONAL_STATE = coordinator.TRANSACTIONAL_STATE  # [transactions]


class ProducerLink(ProducerRoutes, LinkHandler):
    """A link the client sends messages on (the management endpoint's requests too)."""

    is_producer = True
    batches_transfers = True  # Connection.process takes a batch's transfers in one call

    __slots__ = ("conn", "link", "target", "broker", "postoffice", "max_size", "container_id", "name",
                 "temporary", "active", "unconfirmed", "_partial", "memory_key", "resumed", "held", "burst")

    def __init__(self, conn: Connection, link, target: core_links.ProducerTarget):
        self.conn = conn
        self.link = link
        self.target = target
        self.broker = conn.broker
        self.postoffice = conn.broker.postoffice
        self.max_size = conn.broker.config.server.max_message_size
        self.container_id = conn.container_id
        self.name = cproton.pn_link_name(link)
        self.temporary = target.temporary
        self.active = True  # False once detached: late store completions must not touch the link
        # Transfers taken whose outcome waits for the store: they hold credit until their unit
        # commits, so a producer can never be more than PRODUCER_CREDIT messages ahead of it.
        self.unconfirmed = 0
        # The frames so far of a multi-frame transfer, counted against max_memory_mb as they
        # come (None between such transfers: the per-message path tests only that).
        self._partial: Unfinished | None = None
        # Link recovery (protocol.recovery): a durable (`unsettled-state`) target keeps the
        # transfers it accepted unsettled until the client settles them (`held`, delivery ->
        # tag; a RecoveringProducerLink); `resumed`: tags the broker told a recovering sender
        # it has.
        self.memory_key: tuple[str, str] | None = None
        self.resumed: set = set()
        self.held: dict = {}
        # This link's sends of a turn that go through the store, as one journal unit.
        self.burst = Burst(self.postoffice, self._settle_burst)

    @classmethod
    def attach(cls, conn: Connection, link) -> ProducerLink | None:
        remote = read_terminus(lib.pn_link_remote_target(link))
        if remote.coordinator:  # [transactions]
            return coordinator.CoordinatorLink.attach(conn, link)
        server = conn.broker.config.server
        if remote.dynamic:
            kind = MULTICAST if any(c in ("topic", "temporary-topic") for c in remote.capabilities) else ANYCAST
            req = core_links.ProducerRequest(None, dynamic=True, temporary_kind=kind,
                                             user=conn.principal.name if conn.principal is not None else None)
        elif remote.address and "," in remote.address:
            parts = []
            target = core_links.ProducerTarget(remote.address, None, None, parts=parts)
            try:
                for part in split_composite(remote.address):
                    name = parse_name(part, [], server.anycast_prefixes, server.multicast_prefixes)
                    parts.append(conn.broker.attach_producer(
                        core_links.ProducerRequest(name.address, name.routing_type or ANYCAST, name.queue)))
            except Exception:
                core_links.detach_producer(conn.broker.postoffice, target)  # the parts it held
                raise
            req = None
        elif remote.address is None or not remote.present:
            rt = parse_name("", remote.capabilities, (), ()).routing_type
            req = core_links.ProducerRequest(None, routing_type=rt)
        else:
            name = parse_name(remote.address, remote.capabilities, server.anycast_prefixes,
                              server.multicast_prefixes)
            req = core_links.ProducerRequest(name.address, name.routing_type, name.queue)
        if req is not None:
            target = conn.broker.attach_producer(req)
        durable = lib.pn_terminus_get_durability(lib.pn_link_remote_target(link)) == lib.PN_DELIVERIES
        handler = (RecoveringProducerLink if durable else cls)(conn, link, target)
        lib.pn_terminus_copy(lib.pn_link_target(link), lib.pn_link_remote_target(link))
        if remote.dynamic:
            cproton.pn_terminus_set_address(lib.pn_link_target(link), target.address)
        lib.pn_terminus_copy(lib.pn_link_source(link), lib.pn_link_remote_source(link))
        lib.pn_link_set_snd_settle_mode(link, lib.pn_link_remote_snd_settle_mode(link))
        # A durable target's transfers are settled once the client has (so its recovery knows
        # what the client still holds): the broker says it settles second.
        lib.pn_link_set_rcv_settle_mode(link, lib.PN_RCV_SECOND if durable else lib.PN_RCV_FIRST)
        lib.pn_link_set_max_message_size(link, handler.max_size)
        handler._recover(remote)
        lib.pn_link_open(link)
        handler._grant_first_credit()
        return handler

    def _grant_first_credit(self) -> None:
        """The window at attach (even to a full `block` address: the credit check is at top-up),
        out of the journal budget; none while the journal is at its budget."""
        flow = self.postoffice.flow
        credit = min(PRODUCER_CREDIT, flow.journal_room())
        if credit >= PRODUCER_CREDIT_LOW:
            lib.pn_link_flow(self.link, credit)
        else:
            flow.wait(self, self._top_up_credit)

    def _recover(self, remote) -> None:
        """A sender re-attaching with its unsettled map (§2.6.13) learns from our attach which
        of those transfers we have (accepted, and not settled by the client); one of them sent
        again is not enqueued twice. Only the user whose link it was learns anything: another
        user's attach under the same container id and link name gets an empty map."""
        remote_unsettled = self.conn.frame_tap.claim(False, self.name)
        if self.memory_key is None:
            return
        principal, authorization = self.conn.principal, self.broker.authorization
        have = recovery.memory_of(self.broker).producer_resumed(
            self.memory_key, lambda owner: authorization.may_take_over(principal, owner))
        if remote_unsettled is None:
            return  # a new link of that name: its tags start over
        answer = {tag: recovery.accepted_state() for tag in remote_unsettled if tag in have}
        self.conn.frame_tap.max_frame = lib.pn_transport_get_remote_max_frame(self.conn.transport)
        self.conn.frame_tap.answers[self.name] = answer
        self.resumed = set(answer)

    # -- per message (hot path) ---------------------------------------------------------------
    def on_delivery(self, d) -> None:
        """Take every complete transfer the link's credit covers. Proton 0.40 does not enforce
        link credit: `pn_link_credit` is what we granted less what we took, so any queued
        transfer past it came without credit, and ends the link (it is never queued).

        Per transfer, only the engine calls that can change the outcome: the current delivery
        of a receiving link is always readable (Proton's `pn_delivery_readable` is "receiver
        and current"), and an aborted transfer shows 1 byte pending, so `pn_delivery_aborted`
        is asked only then; the bytes are copied out here, not through `receive_bytes`.
        With `_post` inline in `_send_to`, and codec.Envelope's inline reads: Q1 200k x 1 KiB,
        1.26 -> 1.19 broker CPU s per 100k (medians of 4, interleaved, load 2.2-2.7)."""
        link = self.link
        current, partial, pending_of, recv, null = pn_link_current, pn_delivery_partial, pn_delivery_pending, \
            pn_link_recv, ffi.NULL
        # Globals and attributes the loop reads per transfer, read once a batch (the
        # figure: Connection.process).
        advance, buf, buf_size, max_size, receive = pn_link_advance, scratch, SCRATCH_SIZE, self.max_size, self.receive
        allowed = pn_link_credit(link)
        over = pn_link_queued(link) > allowed
        d = current(link)
        while allowed > 0 and d != null:
            pending = pending_of(d)
            if pending <= 1 and pn_delivery_aborted(d):
                if self._partial is not None:
                    self._partial.drop()
                    self._partial = None
                pn_link_advance(link)
                pn_delivery_settle(d)
                allowed -= 1
                d = current(link)
                continue
            if partial(d):
                self._take_partial(pending)
                break
            if self._partial is not None:
                data = self._take_rest(pending)
                if data is None:
                    return
            elif pending > max_size:
                self._too_big(pending)
                return
            elif pending <= buf_size:
                got = recv(link, buf, pending)
                data = unpack(buf, got) if got > 0 else b""
            else:
                data = receive_bytes(link, pending)
            advance(link)
            allowed -= 1
            receive(d, data)
            d = current(link)
        if not self.active:
            return  # ended above (a multi-frame transfer grew too big)
        if over:
            self._end(conditions.TRANSFER_LIMIT_EXCEEDED,
                      f"transfer beyond the link credit granted ({pn_link_credit(link)} left)")
            return
        if pn_link_credit(link) + self.unconfirmed < PRODUCER_CREDIT_LOW:
            self._top_up_credit()

    def _take_partial(self, pending: int) -> None:
        """Move the frames so far of a multi-frame transfer out of Proton, so its session
        window reopens. The transfer is bounded by max_message_size, and its bytes count
        against max_memory_mb before they are copied: one that would go over ends the link."""
        held = self._partial
        have = len(held) if held is not None else 0
        if have + pending > self.max_size:
            self._too_big(have + pending)
            return
        if pending:
            if held is None:
                held = self._partial = Unfinished(self.postoffice.flow)
            if not held.reserve(pending):
                self._over_memory(have + pending)
                return
            held.add(receive_bytes(self.link, pending))
            self.conn.server.mark(self.conn)  # a session flow may be due

    def _take_rest(self, pending: int) -> bytes | None:
        """The last frames of a multi-frame transfer: the whole message (None: refused)."""
        held = self._partial
        whole = len(held) + pending
        if whole > self.max_size:
            self._too_big(whole)
            return None
        if not held.reserve(pending):
            self._over_memory(whole)
            return None
        held.add(receive_bytes(self.link, pending))
        self._partial = None
        return held.take()

    def _top_up_credit(self) -> None:
        """Credit back up to the window, counting the transfers still waiting for the store,
        unless the target is full under the block policy (or the broker is over its memory
        limit): then the producer waits for room."""
        if not self.active:
            return
        flow = self.postoffice.flow
        if flow.may_grant_credit(self.target.address) and not core_links.blocked_downstream(
                self.postoffice, self.target):
            held = lib.pn_link_credit(self.link) + self.unconfirmed
            if held >= PRODUCER_CREDIT_LOW:
                return
            room = flow.journal_room()
            if room < PRODUCER_CREDIT_LOW:
                flow.wait(self, self._top_up_credit)  # the store is behind: credit as it commits
                return
            lib.pn_link_flow(self.link, min(PRODUCER_CREDIT - held, room))
            self.conn.server.mark(self.conn)
        else:
            flow.wait(self, self._top_up_credit)

    def receive(self, d, data: bytes) -> None:
        """One whole transfer, in steps: a resent one we have, its transaction, its envelope,
        where it goes, its address's room, the plan, then posting it (settled at once, or
        when the store has it). Each refusal settles the transfer with its condition."""
        presettled = pn_delivery_settled(d)
        if self.resumed and self._already_have(d, presettled):
            return
        # [transactions] A transfer in a transaction says so in its state (one integer test
        # for every other transfer); its plan is held by the transaction, posted at commit.
        txn = None
        if pn_delivery_remote_state(d) == TRANSACTIONAL_STATE:
            txn = self._transaction_of(d, presettled)
            if txn is None:
                return
        # The transfer's sections, found once; refused when they do not decode or name another
        # user than the one logged in.
        try:
            envelope = Envelope(data)
        except codec.DecodeError as e:
            self._reject(d, presettled, txn, conditions.DECODE_ERROR, str(e))
            return
        if self.broker.validate_user_id and not self._user_id_valid(data, envelope):
            self._reject(d, presettled, txn, conditions.UNAUTHORIZED_ACCESS,
                         "properties.user-id is not the authenticated user")
            return
        target = self.target
        if target.parts is not None:
            self._receive_composite(d, data, envelope, presettled, txn)
            return
        if target.address is None:  # anonymous relay: the message's `to`
            destination = self._relay_destination(d, data, envelope, presettled, txn, target.routing_type)
            if destination is not None:
                self._send_to(d, data, envelope, presettled, txn, *destination)
            return
        # The link's target; the routing type, when the attach left it open, from the message's
        # annotation. Inline rather than a `_destination` call returning a tuple to unpack:
        # Q1, 100k x 1 KiB, with the other cuts of this commit, 1.47 -> 1.42 broker CPU s per
        # 100k (medians of 5, interleaved, load ~3.9).
        rt = target.routing_type
        if rt is None:
            annotations = envelope.annotations
            rt = (annotations and routing_type_annotation(annotations)) or target.attach_routing_type
        self._send_to(d, data, envelope, presettled, txn, target.address, rt, target.queue)

    def _send_to(self, d, data: bytes, envelope, presettled: bool, txn, address: str, rt, queue) -> None:
        """Route one message to its destination and post the plan, unless its address is
        full, its target went, or it is a management request (answered, not routed). Then
        the plan is handed on: to its transaction, or to the post office, settled at once
        when nothing is to be stored (or the sender settled it), else once the store has it."""
        po = self.postoffice
        verdict = po.flow.verdict(address)
        if verdict is not None and self._refused_by_flow(d, presettled, txn, address, verdict):
            return
        broker = self.broker
        message = Message(data, envelope, address, rt, self.container_id, int(wall_clock() * 1000))
        if address == broker.management_address:
            self.conn.server.management.handle(message, self.conn.principal, self.conn.peer)
            self._outcome(d, presettled, PN_ACCEPTED)
            return
        plan = po.route(message, address, rt, queue)
        # The message itself reached a queue (nearly always): nothing was refused.
        refused = None if plan and plan[0][1] else po.unrouted(plan, address, rt, queue)
        if refused is not None:  # its target went: never `accepted` and stored nowhere
            self._reject(d, presettled, txn, conditions.NOT_FOUND, refused)
            return
        if len(plan) > 1 and self._refused_as_full(d, presettled, txn, plan):  # copies: each destination's policy
            return
        # Posting, inline (it was `_post`, one call with five arguments per message).
        if txn is not None:  # [transactions]
            coordinator.hold_send(d, presettled, txn, plan)
            return
        if presettled:
            if not po.post_now(plan):
                self._post_stored(po, plan, None)  # no outcome owed; the credit waits
            pn_delivery_settle(d)
        elif po.post_now(plan):  # nothing to store: accepted at once, no callback to build
            pn_delivery_update(d, PN_ACCEPTED)
            if self.memory_key is not None:
                self._hold(d)  # a durable target: settled when the client settles
            else:
                pn_delivery_settle(d)
        else:
            self._post_stored(po, plan, d)

    def _post_stored(self, po, plan, d) -> None:
        """A send through the store: with this turn's others as one journal unit (`burst`,
        settled together in `_settle_burst`), or alone when its plan is not the usual one.
        The transfer holds its credit until then (`unconfirmed`)."""
        self.unconfirmed += 1
        if not po.post_part(plan, self.burst, d):
            self.unconfirmed -= 1
            po.post(plan, self._completion(d))

    def _settle_burst(self, deliveries: list, outcomes) -> None:
        """Sends of one journal unit stored (`outcomes` None) or not, each as `_completion`
        would settle it (a None delivery was settled at the sender: no outcome owed); the
        credit they held comes back then."""
        self.unconfirmed -= len(deliveries)
        if not self.active:
            return  # the link, and Proton's deliveries with it, is gone
        holds = self.memory_key is not None
        if outcomes is None:
            for d in deliveries:
                if d is not None:
                    pn_delivery_update(d, PN_ACCEPTED)
                    if holds:
                        self._hold(d)
                    else:
                        pn_delivery_settle(d)
        else:
            for d, error in zip(deliveries, outcomes):
                if d is None:
                    continue
                if error is None:
                    lib.pn_delivery_update(d, PN_ACCEPTED)
                    if holds:
                        self._hold(d)
                        continue
                else:
                    set_condition(lib.pn_disposition_condition(lib.pn_delivery_local(d)),
                                  conditions.condition_for(error), f"message not stored: {error}")
                    pn_delivery_update(d, PN_REJECTED)
                pn_delivery_settle(d)
        conn = self.conn
        if not conn.marked:
            conn.server.mark(conn)
        if pn_link_credit(self.link) + self.unconfirmed < PRODUCER_CREDIT_LOW:
            self._top_up_credit()

    def _transaction_of(self, d, presettled: bool):
        """[transactions] The open transaction a transactional transfer names; None (and the
        transfer refused) when there is none."""
        txn, error = coordinator.transfer_transaction(self.conn.transactions, d)
        if txn is None:
            self._outcome(d, presettled, PN_REJECTED, conditions.condition_for(error), str(error))
        return txn

    def _refused_by_flow(self, d, presettled: bool, txn, address: str, verdict) -> bool:
        """The address is full: under `fail` the transfer is refused, under `drop` it is
        accepted and dropped (True: settled here); `block` bites at the credit, not here."""
        if verdict == FAIL:
            self._reject(d, presettled, txn, conditions.RESOURCE_LIMIT_EXCEEDED, f"Address is full: {address}")
            return True
        if verdict == DROP:
            self._outcome(d, presettled, PN_ACCEPTED)
            return True
        return False

    def _already_have(self, d, presettled: bool) -> bool:
        """A transfer a recovering sender sends again that we accepted before the link was
        lost: settled `accepted`, not enqueued a second time."""
        tag = recovery.delivery_tag(d)
        if tag not in self.resumed:
            return False
        self.resumed.discard(tag)
        self._outcome(d, presettled, PN_ACCEPTED)
        return True

    def _hold(self, d) -> None:
        """An accepted transfer on a durable target: left unsettled, its tag kept, until the
        client settles it (`RecoveringProducerLink.on_delivery`). Bounded: past MAX_TAGS the
        oldest is settled here and forgotten (a resend of it would then be a new message)."""
        held = self.held
        held[d] = recovery.delivery_tag(d)
        if len(held) > recovery.MAX_TAGS:
            oldest = next(iter(held))
            del held[oldest]
            pn_delivery_settle(oldest)

    def _completion(self, d):
        """The outcome once the unit is stored (`d` None: the transfer was settled at the
        sender, no outcome is owed); the credit it held comes back then."""
        self.unconfirmed += 1

        def done(error: BaseException | None) -> None:
            self._settle_burst([d], None if error is None else [error])
        return done

    def _refused_as_full(self, d, presettled: bool, txn, plan) -> bool:
        """A destination of the plan is full under `fail`: the send is refused as a direct
        send to it would be (`drop` destinations are taken out of the plan)."""
        full = self.postoffice.admit(plan)
        if full is None:
            return False
        self._reject(d, presettled, txn, conditions.RESOURCE_LIMIT_EXCEEDED, f"Address is full: {full}")
        return True

    def _reject(self, d, presettled: bool, txn, condition: str, description: str) -> None:
        """Refuse a transfer; inside a transaction a dropped presettled one dooms it."""
        self._outcome(d, presettled, PN_REJECTED, condition, description)
        if txn is not None:  # [transactions]
            coordinator.transfer_failed(txn, presettled, condition, description)

    def _outcome(self, d, presettled: bool, outcome: int | None, condition: str | None = None,
                 description: str = "") -> None:
        if not presettled and outcome is not None:
            if condition is not None:
                set_condition(lib.pn_disposition_condition(lib.pn_delivery_local(d)), condition, description)
            lib.pn_delivery_update(d, outcome)
        lib.pn_delivery_settle(d)

    def _too_big(self, size: int) -> None:
        log.info("message of %d bytes over max_message_size %d on %s", size, self.max_size, self.name)
        self._end(conditions.MESSAGE_SIZE_EXCEEDED,
                  f"message of {size} bytes exceeds max_message_size {self.max_size}")

    def _over_memory(self, size: int) -> None:
        limit = self.postoffice.flow.memory_limit
        log.info("transfer of %d bytes so far on %s refused: over max_memory_mb (%d bytes)", size, self.name, limit)
        self._end(conditions.RESOURCE_LIMIT_EXCEEDED,
                  f"transfer of {size} bytes so far would take the broker over max_memory_mb "
                  f"({limit // (1024 * 1024)} MiB)")

    def _end(self, condition: str, description: str) -> None:
        self.conn.end_link(self, condition, description)

    def settle(self, d, outcome: int | None = None, condition: str | None = None,
               description: str = "") -> None:
        self._outcome(d, bool(lib.pn_delivery_settled(d)), outcome, condition, description)

    def on_detach(self, closed: bool, session_end: bool = False) -> None:
        self.active = False
        if self._partial is not None:  # an unfinished transfer goes with its link
            self._partial.drop()
            self._partial = None
        if self.memory_key is not None and not closed:
            # Lost, not closed: what the client had not settled is what its recovery finds.
            principal = self.conn.principal
            recovery.memory_of(self.broker).producer_detached(
                self.memory_key, principal.name if principal is not None else None,
                [*self.held.values(), *self.resumed])
        self.held = {}
        self.postoffice.flow.forget(self)
        core_links.detach_producer(self.postoffice, self.target)
        if self.temporary and self.target.address:
            po = self.postoffice
            if self.target.address in po.queues:
                po.delete_queue(self.target.address)
            else:
                po.delete_address(self.target.address)
            self.temporary = False


class RecoveringProducerLink(ProducerLink):
    """A sender link whose target is durable (`unsettled-state`): its accepted transfers stay
    unsettled until the client settles them, so the broker knows which it may still report
    `accepted` to a recovering sender; a settled one's tag is forgotten (the client may reuse
    it). Its deliveries' updates come one event at a time (the client's settlements); plain
    producer links keep the batched path."""

    __slots__ = ()
    batches_transfers = False

    def __init__(self, conn: Connection, link, target: core_links.ProducerTarget):
        super().__init__(conn, link, target)
        self.memory_key = (self.container_id or "", self.name)

    def on_delivery(self, d) -> None:
        if d is not None and d in self.held:
            if pn_delivery_settled(d):  # the client settled it: forgotten
                del self.held[d]
                pn_delivery_settle(d)
            return
        super().on_delivery(d)
