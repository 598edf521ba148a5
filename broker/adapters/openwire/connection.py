"""One OpenWire client connection, as ActiveMQ Classic serves it: the broker's WireFormatInfo
first, BrokerInfo once the client's has arrived, then the client's commands, each answered with
a Response (or an ExceptionResponse naming the JMS exception) when it asks for one.

The commands are handled in order; a handler may answer later (a persistent send once stored,
a commit, a consumer whose durable queue is being stored): it returns LATER and answers itself.
Answers wait for the acknowledgements read before them to be stored (contract: acks a client
settled before a later round trip the broker answered are stored before the answer).

Keep-alive follows the negotiated MaxInactivityDuration as Classic's InactivityMonitor does: the
broker writes a KeepAliveInfo when it has written nothing for a third of it, and drops a client
it has heard nothing from for all of it (after the negotiated initial delay).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from ...core import errors, limits, links as core_links
from ...core.address import QueuePurpose
from ...core.message import ANYCAST
from ...core.transactions import Transactions
from ...openwire import OpenWireCodec, OpenWireError, model, wire_format_info
from ..connection import ClientConnection
from . import advisories
from .commands import BLOCKED, LATER
from .producers import Producer, ProducerCommands
from .temporary import TemporaryDestinations
from .transactions import TransactionCommands
from .consumers import UNKNOWN, OpenWireConsumer
from .destinations import targets
from .errors import (IO, INVALID_CLIENT_ID, INVALID_DESTINATION, INVALID_SELECTOR, JMS, SECURITY, Refusal, exception_response)

log = logging.getLogger("hermod.openwire")

#: Bytes gathered for the socket before they are written at once, without waiting for the end of
#: the loop turn: the transport's buffer (and with it `writable`) still sees a client that does
#: not read after a few commands.
FLUSH_AT = 64 * 1024


class OpenWireConnection(ProducerCommands, TransactionCommands, TemporaryDestinations, ClientConnection):
    protocol_name = "openwire"

    def __init__(self, server, listener) -> None:
        super().__init__(server, listener)
        limit = self.max_message_size
        self.codec = OpenWireCodec(max_command_size=limit, preferred=wire_format_info(max_frame_size=limit))
        self.loop = server.loop if getattr(server, "loop", None) is not None else asyncio.get_event_loop()
        self.connection_id: model.ConnectionId | None = None
        self.connected = False
        self.logging_in = False
        self.waiting: list[model.DataStructure] = []  # commands read while held (login, full address)
        self.held = False
        self.reading = True  # the socket is read (see _update_reading)
        self.producers: dict[Any, Producer] = {}  # by ProducerId
        self.consumers: dict[Any, OpenWireConsumer] = {}  # by ConsumerId
        self.transactions = Transactions()
        self.txns: dict[Any, Any] = {}  # TransactionId -> core Transaction
        self.temporary: dict[str, str] = {}  # temporary destination name -> routing type
        self.unstored = 0  # acknowledgements being stored
        self.answers: list[model.DataStructure] = []  # answers waiting for those
        self.last_read = self.last_write = time.monotonic()
        self.monitor: asyncio.TimerHandle | None = None
        self.inactivity_s = 0.0
        self.failed = True  # until a clean goodbye (RemoveInfo of the connection, ShutdownInfo)
        self.outgoing: list[bytes] = []  # encoded commands not yet given to the transport
        self.outgoing_size = 0
        self.flush_scheduled = False

    # -- bytes in and out ------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if not self.closed:
            self.write(self.codec.hello())

    def write(self, data: bytes) -> None:
        """Gather what this loop turn sends and give it to the transport once, at the turn's end
        (one system call for a burst of dispatches and answers instead of one each), or as soon
        as FLUSH_AT bytes are waiting."""
        self.outgoing.append(data)
        self.outgoing_size += len(data)
        if self.outgoing_size >= FLUSH_AT:
            self.flush()
        elif not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        out = self.outgoing
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        self.outgoing = []
        self.outgoing_size = 0
        super().write(data)

    def close(self) -> None:
        self.flush()
        super().close()

    def abort(self) -> None:
        self.flush()
        super().abort()

    def received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            commands = self.codec.feed(data)
        except OpenWireError as exc:
            self._protocol_error(str(exc))
            return
        if not self._count_partial():
            return
        for command in commands:
            if self.closed:
                return
            if self.held or self.logging_in:
                self.waiting.append(command)
                continue
            self._handle(command)

    def _count_partial(self) -> bool:
        """A command still arriving counts against the broker's memory limit (contract: every
        byte held for clients) from its size prefix on; one that would go over is refused and
        the connection closed before its bytes are kept."""
        wanted = self.codec.pending_bytes()
        if not self.hold_unfinished(wanted):
            self._protocol_error(f"a command of {wanted} bytes would take the broker over its memory limit")
            return False
        return True

    def send_command(self, command: model.DataStructure) -> None:
        if self.closed or self.transport is None:
            return
        try:
            data = self.codec.encode(command)
        except OpenWireError as exc:
            log.warning("openwire %s: cannot encode %s: %s", self.peer, type(command).__name__, exc)
            return
        self.last_write = time.monotonic()
        self.write(data)

    def _protocol_error(self, reason: str) -> None:
        log.warning("openwire connection %s closed: %s", self.peer, reason)
        self.send_command(model.ConnectionError(exception=model.Throwable(IO, reason)))
        self.close()
        self.closed = True

    def refuse_and_close(self, reason: str) -> None:
        self.send_command(model.ConnectionError(exception=model.Throwable(JMS, reason)))
        self.close()

    # -- dispatching commands ---------------------------------------------------------------------
    def _handle(self, command: model.DataStructure) -> None:
        handler: Callable[[OpenWireConnection, Any], Any] | None = _HANDLERS.get(type(command))
        if handler is None:
            if isinstance(command, model.Message):
                handler = _on_message
            else:
                self.answer(command)
                return
        if not self.connected and handler not in _BEFORE_CONNECT:
            self._refuse(command, Refusal(JMS, f"{type(command).__name__} before ConnectionInfo"))
            return
        try:
            result = handler(self, command)
        except (errors.HermodError, Refusal, OpenWireError) as exc:
            self._refuse(command, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a bug answers this command, never the others
            log.exception("openwire %s: %s failed", self.peer, type(command).__name__)
            self._refuse(command, Refusal(JMS, f"internal error: {exc}"))
            return
        if result is BLOCKED:
            self.held = True
            self.waiting.insert(0, command)
            self._update_reading()
            self.broker.postoffice.flow.wait(self, self._resume)
            return
        if result is not LATER:
            self.answer(command)

    def _resume(self) -> None:
        if self.closed:
            return
        self.held = False
        self._update_reading()
        self._drain_waiting()

    def _drain_waiting(self) -> None:
        waiting, self.waiting = self.waiting, []
        for i, command in enumerate(waiting):
            if self.closed:
                return
            if self.held or self.logging_in:
                self.waiting = waiting[i:] + self.waiting
                return
            self._handle(command)

    def _refuse(self, command, exc: BaseException) -> None:
        if getattr(command, "response_required", False):
            self._send_answer(exception_response(command.command_id, exc))
        else:
            log.info("openwire %s: %s refused: %s", self.peer, type(command).__name__, exc)
            if isinstance(command, model.Message):
                if command.transaction_id is not None:
                    txn = self.txns.get(command.transaction_id)
                    if txn is not None:
                        txn.mark_rollback_only(exc)
                self._ack_window(command)  # a producer window gets its room back all the same

    def answer(self, command, exc: BaseException | None = None) -> None:
        """Answer `command` if it asked for an answer."""
        if not getattr(command, "response_required", False):
            return
        if exc is not None:
            self._send_answer(exception_response(command.command_id, exc))
        else:
            self._send_answer(model.Response(correlation_id=command.command_id))

    def _send_answer(self, response: model.DataStructure) -> None:
        if self.unstored:
            self.answers.append(response)
        else:
            self.send_command(response)

    def store_outcome(self, apply: Callable[[Any], None], ref) -> None:
        """Apply an acknowledgement (or a dead-lettering); later answers wait for its store."""
        if not ref.durable:
            apply(None)
            return
        self.unstored += 1

        def done(error: BaseException | None) -> None:
            if error is not None:
                log.warning("openwire %s: acknowledgement of message %s not stored: %s", self.peer,
                            ref.message.id, error)
            self.unstored -= 1
            if not self.unstored and self.answers:
                answers, self.answers = self.answers, []
                for a in answers:
                    self.send_command(a)
        apply(done)

    # -- negotiation, keep-alive -----------------------------------------------------------------------
    def _on_wire_format(self, info: model.WireFormatInfo) -> Any:
        n = self.codec.negotiated
        if n is None:
            return None
        if not self.connected and self.monitor is None:
            self.send_command(model.BrokerInfo(
                broker_id=model.BrokerId(f"ID:{self.broker.container_id}"), broker_name="hermod",
                broker_url=f"tcp://{self._local()}"))
        if n.max_inactivity_duration > 0 and self.monitor is None:
            self.inactivity_s = n.max_inactivity_duration / 1000
            delay = max(n.max_inactivity_initial_delay / 1000, 0.0)
            self.monitor = self.loop.call_later(delay + self.inactivity_s / 3, self._check_activity)
        return None

    def _local(self) -> str:
        sock = self.transport.get_extra_info("sockname") if self.transport is not None else None
        return f"{sock[0]}:{sock[1]}" if sock else "?"

    def _check_activity(self) -> None:
        self.monitor = None
        if self.closed:
            return
        now = time.monotonic()
        if now - self.last_read > self.inactivity_s:
            log.warning("openwire connection %s closed: nothing received for %.1f s (MaxInactivityDuration)",
                        self.peer, now - self.last_read)
            self.send_command(model.ConnectionError(exception=model.Throwable(
                IO, f"Channel was inactive for too (>{int(self.inactivity_s * 1000)}) long: {self.peer}")))
            self.abort()
            return
        if now - self.last_write >= self.inactivity_s / 3:
            self.send_command(model.KeepAliveInfo())
        self.monitor = self.loop.call_later(max(self.inactivity_s / 3, 0.05), self._check_activity)

    def _on_keep_alive(self, info: model.KeepAliveInfo) -> Any:
        if info.response_required:
            self.send_command(model.KeepAliveInfo())
        return LATER

    # -- connection -------------------------------------------------------------------------------
    def _on_connection_info(self, info: model.ConnectionInfo) -> Any:
        if self.connected:
            return None  # a failover reconnect resends it
        if self.over_connection_limit:
            self._refuse(info, Refusal(JMS, "the broker's connection limit is reached"))
            self.close()
            return LATER
        self.logging_in = True
        self._update_reading()  # nothing more is read until the login is decided
        self.loop.create_task(self._login(info))
        return LATER

    async def _login(self, info: model.ConnectionInfo) -> None:
        try:
            principal, why = await self.login(info.user_name, info.password)
        except Exception as exc:  # noqa: BLE001
            principal, why = None, str(exc)
        self.logging_in = False
        if self.closed:
            return
        self._update_reading()
        if principal is None:
            self._refuse(info, Refusal(SECURITY, f"User name [{info.user_name}] or password is invalid. ({why})"))
            self.loop.call_later(0.1, self.close)
            self.held = True  # read nothing more
            self._update_reading()
            return
        client_id = info.client_id
        if client_id and any(isinstance(c, OpenWireConnection) and c is not self and c.client_id == client_id
                             and not c.closed for c in self.server.clients):
            self._refuse(info, Refusal(INVALID_CLIENT_ID, f"Broker: hermod - Client: {client_id} already connected"))
            self.loop.call_later(0.1, self.close)
            self.held = True
            self._update_reading()
            return
        self.client_id = client_id
        self.connection_id = info.connection_id
        self.connected = True
        log.info("openwire connection %s: user %s, client id %s", self.peer, principal.name, client_id)
        self.answer(info)
        self._drain_waiting()

    @property
    def user(self) -> str | None:
        return self.principal.name if self.principal is not None else None

    def _on_session_info(self, info: model.SessionInfo) -> Any:
        return None

    def _on_shutdown(self, info: model.ShutdownInfo) -> Any:
        self.failed = False
        self.close()
        return LATER

    def _on_remove(self, info: model.RemoveInfo) -> Any:
        oid = info.object_id
        last = info.last_delivered_sequence_id
        if isinstance(oid, model.ConsumerId):
            consumer = self.consumers.pop(oid, None)
            if consumer is not None:
                consumer.close(failed=False, last_delivered=last)
        elif isinstance(oid, model.ProducerId):
            self.producers.pop(oid, None)
        elif isinstance(oid, model.SessionId):
            for cid in [c for c in self.consumers if c.connection_id == oid.connection_id
                        and c.session_id == oid.value]:
                self.consumers.pop(cid).close(failed=False, last_delivered=last)
            for pid in [p for p in self.producers if p.session_id == oid.value]:
                del self.producers[pid]
        elif isinstance(oid, model.ConnectionId):
            self.failed = False
            self._release_all(failed=False, last_delivered=last)
        return None

    # -- consumers ----------------------------------------------------------------------------------
    def _on_consumer_info(self, info: model.ConsumerInfo) -> Any:
        if info.consumer_id in self.consumers:
            raise Refusal(JMS, f"consumer {info.consumer_id} exists")
        consumer = OpenWireConsumer(self, info)
        parts = targets(info.destination)
        broker = self.broker
        try:
            limits.check_selector(info.selector)
        except errors.InvalidField as exc:
            raise Refusal(INVALID_SELECTOR, str(exc)) from None
        predicate = broker.compile_consumer_selector(info.selector) if info.selector else None
        durable = bool(info.subscription_name) and isinstance(info.destination, model.Topic)
        if durable and not self.client_id:
            raise Refusal(JMS, "You cannot create a durable subscriber without specifying a unique clientID on a Connection")
        origin = self.client_id or (self.connection_id.value if self.connection_id else "")
        try:
            for t in parts:
                if t.temporary and t.routing_type == ANYCAST and t.address not in self.temporary \
                        and t.address not in broker.postoffice.queues:
                    raise Refusal(INVALID_DESTINATION, f"temporary queue {t.address} does not exist")
                req = core_links.ConsumerRequest(
                    t.address, t.routing_type, t.queue, browser=info.browser, selector=info.selector,
                    selector_predicate=predicate, priority=info.priority,
                    no_local_container=origin if info.no_local else None,
                    subscription_queue=f"{self.client_id}.{info.subscription_name}" if durable else None,
                    durable=durable, exclusive=info.exclusive, user=self.user)
                with broker.acting_as(self.principal):
                    core = broker.attach_consumer(req, consumer, owner=self)
                consumer.consumers.append(core)
                if not self.writable:
                    core.blocked = True
        except BaseException:
            consumer.close(failed=False)
            raise
        if durable:
            consumer.subscription = f"{self.client_id}.{info.subscription_name}"
        self.consumers[info.consumer_id] = consumer
        waiting = [c.queue for c in consumer.consumers if not c.queue.persisted]

        def ready() -> None:
            if self.closed or consumer.id not in self.consumers:
                return
            advisories.existing(self, consumer.consumers)
            self.answer(info)
            consumer.refill()
            if consumer.browser:
                self.loop.call_soon(consumer.end_browse)

        if not waiting:
            ready()
            return LATER
        remaining = {id(q) for q in waiting}

        def stored(queue, error: BaseException | None) -> None:
            if error is not None:
                self.consumers.pop(consumer.id, None)
                consumer.close(failed=False)
                self.answer(info, Refusal(JMS, f"queue {queue.name} not stored: {error}"))
                return
            remaining.discard(id(queue))
            if not remaining:
                ready()

        for queue in waiting:
            queue.when_persisted(stored)
        return LATER

    def _on_ack(self, ack: model.MessageAck) -> Any:
        consumer = self.consumers.get(ack.consumer_id)
        if consumer is None:
            return None
        txn = None
        if ack.transaction_id is not None:
            txn = self.txns.get(ack.transaction_id)
        consumer.acknowledge(ack, txn)
        return None

    def _on_pull(self, pull: model.MessagePull) -> Any:
        consumer = self.consumers.get(pull.consumer_id)
        if consumer is not None:
            consumer.pull(pull.timeout)
        return None

    def _on_remove_subscription(self, info: model.RemoveSubscriptionInfo) -> Any:
        name = f"{info.client_id or self.client_id}.{info.subscription_name}"
        po = self.broker.postoffice
        queue = po.queues.get(name)
        if queue is None or queue.purpose != QueuePurpose.SUBSCRIPTION:
            raise Refusal(INVALID_DESTINATION, f"No durable subscription exists for clientID: {info.client_id} "
                                               f"and subscriptionName: {info.subscription_name}")
        core_links.check_owner(po, queue, self.user)
        if queue.consumers:
            raise Refusal(JMS, f"Durable consumer is in use for client: {info.client_id} and subscriptionName: "
                               f"{info.subscription_name}")
        denial = self.broker.subscription_delete_denial(self.principal, queue) \
            if self.broker.authorization.enabled else None
        if denial is not None:
            raise errors.NotAuthorized(denial)
        po.delete_queue(name)
        return None

    def _ignore(self, command) -> Any:
        return None

    # -- the end --------------------------------------------------------------------------------------
    def _release_all(self, *, failed: bool, last_delivered: int = UNKNOWN) -> None:
        for txn in list(self.txns.values()):
            txn.rollback()
        self.txns.clear()
        consumers, self.consumers = list(self.consumers.values()), {}
        for consumer in consumers:
            consumer.close(failed=failed, last_delivered=last_delivered)
        self.producers.clear()
        for name in list(self.temporary):
            rt = self.temporary[name]
            self._remove_temporary(name)
            if self.connection_id is not None:
                advisories.temporary_destination(self, model.DestinationInfo(
                    connection_id=self.connection_id, operation_type=1,
                    destination=model.TempQueue(name) if rt == ANYCAST else model.TempTopic(name)))

    def on_closed(self, exc: BaseException | None) -> None:
        if self.monitor is not None:
            self.monitor.cancel()
            self.monitor = None
        self.broker.postoffice.flow.forget(self)
        self._release_all(failed=self.failed)

    def writability_changed(self) -> None:
        for consumer in self.consumers.values():
            consumer.set_blocked(not self.writable)
        self._update_reading()

    def _update_reading(self) -> None:
        """Read from the socket only while commands can be handled and answered: not during the
        login, not while a send waits for room (`block`), not while the client does not read
        what it is sent (its answers would pile up in the broker)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        want = not (self.held or self.logging_in) and self.writable
        if want != self.reading:
            self.reading = want
            (transport.resume_reading if want else transport.pause_reading)()

    def describe_links(self) -> list[dict]:
        return [c.describe() for c in self.consumers.values()] + [
            {"role": "producer", "name": str(pid.value),
             "address": p.info.destination.physical_name if p.info.destination else None}
            for pid, p in self.producers.items()]


_on_message: Callable[[OpenWireConnection, Any], Any] = OpenWireConnection._on_message
_HANDLERS: dict[type, Callable[[OpenWireConnection, Any], Any]] = {
    model.WireFormatInfo: OpenWireConnection._on_wire_format,
    model.KeepAliveInfo: OpenWireConnection._on_keep_alive,
    model.ConnectionInfo: OpenWireConnection._on_connection_info,
    model.ShutdownInfo: OpenWireConnection._on_shutdown,
    model.SessionInfo: OpenWireConnection._on_session_info,
    model.RemoveInfo: OpenWireConnection._on_remove,
    model.ProducerInfo: OpenWireConnection._on_producer_info,
    model.ConsumerInfo: OpenWireConnection._on_consumer_info,
    model.MessageAck: OpenWireConnection._on_ack,
    model.MessagePull: OpenWireConnection._on_pull,
    model.RemoveSubscriptionInfo: OpenWireConnection._on_remove_subscription,
    model.TransactionInfo: OpenWireConnection._on_transaction,
    model.DestinationInfo: OpenWireConnection._on_destination_info,
    model.ConsumerControl: OpenWireConnection._ignore,
    model.ConnectionControl: OpenWireConnection._ignore,
    model.FlushCommand: OpenWireConnection._ignore,
    model.ControlCommand: OpenWireConnection._ignore,
    model.Response: OpenWireConnection._ignore,
    model.BrokerInfo: OpenWireConnection._ignore,
    model.ConnectionError: OpenWireConnection._ignore,
}
_BEFORE_CONNECT = {OpenWireConnection._on_wire_format, OpenWireConnection._on_keep_alive,
                   OpenWireConnection._on_connection_info, OpenWireConnection._on_shutdown,
                   OpenWireConnection._ignore}

__all__ = ["OpenWireConnection"]
