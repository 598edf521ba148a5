"""Transaction coordinator: the link a client declares and discharges local transactions on,
and the two places transactions touch the other links.

- Coordinator link (target `coordinator`): a `declare` gets `declared{txn-id}`; a `discharge`
  commits (`fail` false) or rolls back, answered `accepted` once done. An unknown txn-id is
  `rejected` with `amqp:illegal-state`; committing a rollback-only transaction is `rejected`
  with the cause recorded when it was marked.
- Producer links: a transfer whose state is `transactional-state{txn-id}` is routed at once
  but held by the transaction (posted at commit) and settled at once with
  `transactional-state{txn-id, accepted}`.
- Consumer links: a disposition `transactional-state{txn-id, accepted}` hands the delivery to
  the transaction: acknowledged and settled at commit, given back at rollback.

Transactions belong to the connection (any session and link of it may use one), and roll back
when the coordinator link that declared them goes away. Everything here is off the
per-message path of non-transactional traffic: producer.py and consumer.py call in only when a delivery's state
says it is transactional (0x34), so Proton's data wrappers are fine for reading txn-ids.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import cproton
from cproton_ffi import ffi, lib
from proton import Message as AmqpMessage
from .binding import Described, SymbolList, dat2obj, obj2dat, symbol, ulong

from ..core.transactions import Transaction, Transactions, UnknownTransaction
from . import conditions
from .handler import LinkHandler
from .transfers import receive_bytes

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("hermod.transactions")

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
_DECLARE = (0x31, "amqp:declare:list")
_DISCHARGE = (0x32, "amqp:discharge:list")
_ACCEPTED = (0x24, "amqp:accepted:list")
CAPABILITIES = ("amqp:local-transactions", "amqp:multi-txns-per-ssn", "amqp:multi-ssns-per-txn")
COORDINATOR_CREDIT = 100
MAX_CONTROL_SIZE = 64 * 1024  # a declare or discharge is a few dozen bytes
_ACCEPTED_OUTCOME = Described(ulong(0x24), [])


class TransferFailed(Exception):
    """Why a rollback-only transaction cannot commit, when the cause was an AMQP outcome."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition


class ConnectionTransactions:
    """What one connection knows about transactions: the open ones, and the consumer
    deliveries they hold (so a client that settles one later is noticed). The connection owns
    it (`Connection.transactions`, made when its first coordinator link attaches); this module
    reads and changes it, and tells the links what became of their deliveries through their
    public methods (`LinkHandler.settle`, `ConsumerLink.keep`), never their own tables."""

    __slots__ = ("transactions", "held")

    def __init__(self):
        self.transactions = Transactions()
        self.held: dict = {}  # (ConsumerLink, pn_delivery_t*) -> Acquisition

    def of_transfer(self, d) -> tuple[Transaction | None, UnknownTransaction | None]:
        """The open transaction a transactional transfer names, or why there is none."""
        txn_id, _ = _transactional_state(d)
        txn = self.transactions.find(txn_id)
        return (txn, None) if txn is not None else (None, self.transactions.missing(txn_id))

    def acquire(self, link, d, ref, settled: bool) -> bool:
        """A consumer's `transactional-state` disposition: only `{txn, accepted}` hands the
        delivery to the transaction (True); anything else is the link's to handle (False)."""
        txn_id, outcome = _transactional_state(d)
        txn = self.transactions.find(txn_id)
        if txn is None or not _is_accepted(outcome):
            return False
        acquisition = txn.acquire(ref, (link, d), settled)
        if settled:
            acquisition.handle = None
        else:
            self.held[(link, d)] = acquisition
        return True

    def forget(self, link, d) -> None:
        """The client settled a delivery its link no longer tracks: if a transaction holds it,
        note that the delivery is gone (the link settles it)."""
        if self.held:
            acquisition = self.held.pop((link, d), None)
            if acquisition is not None:
                acquisition.settled = True
                acquisition.handle = None

    def finish(self, txn: Transaction, committed: bool) -> list:
        """After a discharge, what becomes of each delivery the transaction held and the client
        has not settled: `(link, delivery, ref)`, `ref` None when it is to be settled (it was
        acknowledged, or went back to its queue), else the Ref it stays unsettled for."""
        outcomes = []
        for a in txn.acquired:
            if a.handle is None:
                continue
            link, d = a.handle
            a.handle = None
            self.held.pop((link, d), None)
            outcomes.append((link, d, a.ref if not committed and a.kept else None))
        return outcomes


def transactions_of(conn: Connection) -> ConnectionTransactions:
    """The connection's transactions, made when first needed."""
    state = conn.transactions
    if state is None:
        state = conn.transactions = ConnectionTransactions()
    return state


def _set_condition(disposition, name: str, description: str) -> None:
    cond = lib.pn_disposition_condition(disposition)
    cproton.pn_condition_set_name(cond, name)
    cproton.pn_condition_set_description(cond, description)


def _binary(value) -> bytes | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return None


def _transactional_state(d) -> tuple[bytes | None, object]:
    """The (txn-id, outcome) of a delivery's remote `transactional-state`."""
    fields = dat2obj(lib.pn_disposition_data(lib.pn_delivery_remote(d)))
    if not isinstance(fields, list) or not fields:
        return None, None
    return _binary(fields[0]), fields[1] if len(fields) > 1 else None


def _is_accepted(outcome) -> bool:
    return isinstance(outcome, Described) and outcome.descriptor in _ACCEPTED


def _condition_of(error: BaseException) -> str:
    return getattr(error, "condition", None) or conditions.condition_for(error)


# -- producer links ----------------------------------------------------------------------------
def transfer_transaction(state: ConnectionTransactions | None, d) -> tuple[Transaction | None, Exception | None]:
    """The open transaction a transactional transfer names, or the error to refuse it with."""
    if state is None:
        txn_id, _ = _transactional_state(d)
        return None, UnknownTransaction(f"unknown transaction {txn_id!r}")
    return state.of_transfer(d)


def hold_send(d, presettled: bool, txn: Transaction, plan) -> None:
    """Keep a routed message for commit; settle its transfer now, accepted in the transaction."""
    txn.add_send(plan)
    if not presettled:
        obj2dat([txn.id, _ACCEPTED_OUTCOME], lib.pn_disposition_data(lib.pn_delivery_local(d)))
        lib.pn_delivery_update(d, TRANSACTIONAL_STATE)
    lib.pn_delivery_settle(d)


def transfer_failed(txn: Transaction, presettled: bool, condition: str, description: str) -> None:
    """A presettled transactional transfer that could not be taken is dropped; the client
    cannot know, so its transaction must not commit."""
    if presettled:
        txn.mark_rollback_only(TransferFailed(condition, description))


# -- the coordinator link ----------------------------------------------------------------------
class CoordinatorLink(LinkHandler):
    """The link a client sends `declare` and `discharge` on."""

    # Each delivery is handled on its own event (Connection.process), not batched:
    after_transfers = True  # transfers that came before a discharge are handled before it

    __slots__ = ("conn", "link", "state", "postoffice", "name", "active", "timeout", "_timer")

    def __init__(self, conn: Connection, link):
        self.conn = conn
        self.link = link
        self.state = transactions_of(conn)
        self.postoffice = conn.broker.postoffice
        self.name = cproton.pn_link_name(link)
        self.active = True
        self.timeout = conn.broker.config.server.transaction_timeout_s
        self._timer = None

    @classmethod
    def attach(cls, conn: Connection, link) -> CoordinatorLink:
        handler = cls(conn, link)
        target = lib.pn_link_target(link)
        lib.pn_terminus_copy(target, lib.pn_link_remote_target(link))
        caps = lib.pn_terminus_capabilities(target)
        lib.pn_data_clear(caps)
        obj2dat(SymbolList([symbol(c) for c in CAPABILITIES]), caps)
        lib.pn_terminus_copy(lib.pn_link_source(link), lib.pn_link_remote_source(link))
        lib.pn_link_set_snd_settle_mode(link, lib.pn_link_remote_snd_settle_mode(link))
        lib.pn_link_set_rcv_settle_mode(link, lib.PN_RCV_FIRST)
        lib.pn_link_open(link)
        lib.pn_link_flow(link, COORDINATOR_CREDIT)
        return handler

    def on_delivery(self, d) -> None:
        """Control messages within the credit granted; a transfer past it, or one bigger than
        any control message, ends the link (nothing is buffered for it)."""
        link = self.link
        allowed = lib.pn_link_credit(link)
        over = lib.pn_link_queued(link) > allowed
        d = lib.pn_link_current(link)
        while allowed > 0 and d != ffi.NULL and lib.pn_delivery_readable(d):
            size = lib.pn_delivery_pending(d)
            if size > MAX_CONTROL_SIZE:
                self._end(conditions.MESSAGE_SIZE_EXCEEDED,
                          f"a control message over {MAX_CONTROL_SIZE} bytes")
                return
            if lib.pn_delivery_partial(d):
                break
            allowed -= 1
            if lib.pn_delivery_aborted(d):
                lib.pn_link_advance(link)
                lib.pn_delivery_settle(d)
            else:
                data = receive_bytes(link, size)
                lib.pn_link_advance(link)
                self._control(d, data, bool(lib.pn_delivery_settled(d)))
            d = lib.pn_link_current(link)
        if over:
            self._end(conditions.TRANSFER_LIMIT_EXCEEDED, "transfer beyond the link credit granted")
            return
        credit = lib.pn_link_credit(link)
        if credit < COORDINATOR_CREDIT // 2:
            lib.pn_link_flow(link, COORDINATOR_CREDIT - credit)

    def _end(self, condition: str, description: str) -> None:
        self.conn.end_link(self, condition, description)

    def _control(self, d, data: bytes, presettled: bool) -> None:
        try:
            message = AmqpMessage()
            message.decode(data)
            body = message.body
        except Exception as e:  # noqa: BLE001 - a bad control message is refused, not fatal
            self._reply(d, presettled, lib.PN_REJECTED, conditions.DECODE_ERROR, f"bad control message: {e}")
            return
        descriptor = body.descriptor if isinstance(body, Described) else None
        fields = body.value if isinstance(body, Described) and isinstance(body.value, list) else []
        if descriptor in _DECLARE:
            self._declare(d, fields, presettled)
        elif descriptor in _DISCHARGE:
            self._discharge(d, fields, presettled)
        else:
            self._reply(d, presettled, lib.PN_REJECTED, conditions.DECODE_ERROR,
                        "expected a declare or discharge")

    def _declare(self, d, fields: list, presettled: bool) -> None:
        if fields and fields[0] is not None:
            self._reply(d, presettled, lib.PN_REJECTED, conditions.NOT_IMPLEMENTED,
                        "global transactions are not supported")
            return
        txn = self.state.transactions.declare(owner=self, postoffice=self.postoffice)
        log.debug("declared %r on %s", txn.id, self.conn.peer)
        self._reply(d, presettled, DECLARED, data=[txn.id])
        txn.declared_at = self.conn.server.loop.time()
        self._arm()

    # -- the transaction timeout: one timer per coordinator link, set for its oldest transaction
    def _arm(self) -> None:
        if self._timer is not None or self.timeout <= 0 or not self.active:
            return
        owned = self.state.transactions.owned_by(self)
        if owned:
            oldest = min(t.declared_at for t in owned)
            self._timer = self.conn.server.loop.call_at(oldest + self.timeout, self._sweep)

    def _sweep(self) -> None:
        """Roll back the transactions open longer than the timeout (Artemis does the same)."""
        self._timer = None
        if not self.active:
            return
        state = self.state
        now = self.conn.server.loop.time()
        for txn in state.transactions.owned_by(self):
            if now - txn.declared_at >= self.timeout and state.transactions.time_out(txn):
                log.warning("transaction %r on %s timed out after %g s and was rolled back",
                            txn.id, self.conn.peer, self.timeout)
                self._finish(txn, committed=False)
        self._arm()

    def _discharge(self, d, fields: list, presettled: bool) -> None:
        txn_id = _binary(fields[0]) if fields else None
        fail = bool(fields[1]) if len(fields) > 1 else False
        try:
            txn = self.state.transactions.discharge(txn_id)
        except UnknownTransaction as e:
            self._reply(d, presettled, lib.PN_REJECTED, conditions.condition_for(e), str(e))
            return
        if fail:
            txn.rollback()
            self._finish(txn, committed=False)
            self._reply(d, presettled, lib.PN_ACCEPTED)
            return

        def done(error: BaseException | None) -> None:
            self._finish(txn, committed=error is None)
            if not self.active:
                return  # the link (and the discharge delivery) is gone
            if error is None:
                self._reply(d, presettled, lib.PN_ACCEPTED)
            else:
                log.info("commit of %r on %s failed: %s", txn.id, self.conn.peer, error)
                self._reply(d, presettled, lib.PN_REJECTED, _condition_of(error), str(error))

        txn.commit(self.postoffice, done)

    def _reply(self, d, presettled: bool, outcome: int | None, condition: str | None = None,
               description: str = "", data: list | None = None) -> None:
        if not presettled and outcome is not None:
            local = lib.pn_delivery_local(d)
            if data is not None:
                obj2dat(data, lib.pn_disposition_data(local))
            if condition is not None:
                _set_condition(local, condition, description)
            lib.pn_delivery_update(d, outcome)
        lib.pn_delivery_settle(d)
        self.conn.server.mark(self.conn)

    def settle(self, d, outcome: int | None = None, condition: str | None = None,
               description: str = "") -> None:
        self._reply(d, bool(lib.pn_delivery_settled(d)), outcome, condition, description)

    def on_detach(self, closed: bool, session_end: bool = False) -> None:
        """Transactions declared here and not discharged roll back."""
        self.active = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        state = self.state
        for txn in state.transactions.owned_by(self):
            state.transactions.active.pop(txn.id, None)
            txn.rollback()
            self._finish(txn, committed=False)

    def _finish(self, txn: Transaction, committed: bool) -> None:
        """Settle what the transaction acknowledged; give back to its link what stays with its
        consumer after a rollback."""
        for link, d, kept in self.state.finish(txn, committed):
            if kept is None:
                link.settle(d)
            else:
                link.keep(d, kept)


__all__ = ["ConnectionTransactions", "CoordinatorLink", "TRANSACTIONAL_STATE", "hold_send",
           "transactions_of", "transfer_failed", "transfer_transaction"]
