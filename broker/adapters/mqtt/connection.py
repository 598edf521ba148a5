"""One MQTT client connection (3.1, 3.1.1, 5.0), from the front door's hand-over to close.

Bytes go through the codec's `PacketReader` (the packet size checked against
`max_message_size`, and in 5.0 the broker's maximum packet size, before a body is kept). The
CONNECT logs in through `ClientConnection.login` (the throttle, the audit, the per-user
limit); packets that arrive meanwhile wait, reading paused. Then the session (sessions.py):
taken over from another connection with the same client id, resumed or started clean.

PUBLISH: QoS 0 published; QoS 1 PUBACKed and QoS 2 PUBRECed only once `publish`'s done says
the message is stored where it must be. A 5.0 client is refused with a reason code (0x87 for a
permission denial, 0x97 for a full address); 3.1.1 has no refusal, so a publish the user may
not send is acknowledged and dropped (the denial is logged and audited by the one decision).

Keep-alive: a client silent for 1.5 times its keep-alive is dropped (its will published); a
5.0 client asking for none or for more than MAX_KEEP_ALIVE gets the server keep-alive.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from ...core import links as core_links
from ...core.errors import HermodError, NotAuthorized
from ...core.publishing import blocked
from ...mqtt import (MQTT_3_1, MQTT_5, ConnAck, Connect, Disconnect, MqttError, PacketReader, PingReq, PingResp,
                     Properties, PubAck, PubComp, Publish, PubRec, PubRel, SubAck, Subscribe, UnsubAck, Unsubscribe,
                     UnsupportedProtocol, encode)
from ...mqtt import errors as codes
from ...mqtt.properties import EMPTY
from ...mqtt.topics import parse_shared, validate_topic_filter, validate_topic_name
from ..connection import ClientConnection
from . import qos2, retained
from .delivery import Outbox
from .inbound import publish_message
from .refusals import reason_for
from .sessions import NEVER, Session, drop_subscription, sessions_of
from .subscriptions import EXTRA_KEY, Subscription
from .will import PendingWill, publish_will

if TYPE_CHECKING:
    from ...mqtt import Packet

log = logging.getLogger("hermod.mqtt")

RECEIVE_MAXIMUM = 256  # unacknowledged QoS 1 and 2 PUBLISHes a client may have towards the broker
TOPIC_ALIAS_MAXIMUM = 64  # topic aliases a 5.0 client may set towards the broker
MAX_KEEP_ALIVE = 3600  # seconds; a 5.0 client asking more (or none) is told this
MAX_SUBSCRIPTIONS = 1000  # topic filters one session may hold
WAITING, CONNECTING, CONNECTED, CLOSING = range(4)


class MqttConnection(ClientConnection):
    protocol_name = "mqtt"

    def __init__(self, server, listener) -> None:
        super().__init__(server, listener)
        self.reader = PacketReader(self.max_message_size)
        self.version = 4
        self.state = WAITING
        self.out: list[bytes] = []  # packets to write at the end of this loop turn (flush)
        self.waiting: deque[Packet] = deque()  # read while logging in, or while an address is full
        self.session: Session | None = None
        self.outbox: Outbox | None = None
        self.will: PendingWill | None = None
        self.keep_alive = 0
        self.last_heard = 0.0
        self.alive_timer: asyncio.TimerHandle | None = None
        self.aliases_in: dict[int, str] = {}
        self.unacked_in = 0  # QoS 1 and 2 PUBLISHes not yet acknowledged (and QoS 2 awaiting PUBREL)
        self.clean_end = False  # a DISCONNECT 0x00 (no will)
        self.paused_for: set[str] = set()  # why reading is paused: "login", "flow", "backlog"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.server.loop

    # -- bytes in --------------------------------------------------------------------------------
    def received(self, data: bytes) -> None:
        self.last_heard = self.loop.time()
        try:
            packets = self.reader.feed(data)
        except UnsupportedProtocol as e:
            log.warning("MQTT connection %s: %s; refused", self.peer, e)
            self.queue_out(e.connack)
            self.state = CLOSING
            self.close()
            return
        except MqttError as e:
            for packet in e.packets:
                self._handle(packet)
            self.protocol_violation(e.reason_code, str(e))
            return
        if not self.hold_unfinished(self.reader.buffered):  # a packet still arriving: its bytes count
            self.protocol_violation(codes.QUOTA_EXCEEDED, f"the broker's memory limit is reached: an unfinished packet "
                                                    f"of {self.reader.buffered} bytes is refused")
            return
        for packet in packets:
            if self.state == CLOSING:
                return
            self._handle(packet)

    def _handle(self, packet: Packet) -> None:
        if self.state == CONNECTING or self.waiting or "flow" in self.paused_for:
            self.waiting.append(packet)  # handled in order once the login or the room comes
            return
        self._dispatch(packet)

    def _dispatch(self, packet: Packet) -> None:
        if isinstance(packet, Connect):
            self._connect(packet)
            return
        if self.state != CONNECTED:
            return
        try:
            handler: Callable[[MqttConnection, Any], None] | None = _HANDLERS.get(type(packet))
            if handler is None:
                self.protocol_violation(codes.PROTOCOL_ERROR, f"unexpected {type(packet).__name__}")
                return
            handler(self, packet)
        except MqttError as e:
            self.protocol_violation(e.reason_code, str(e))

    def protocol_violation(self, reason_code: int, why: str) -> None:
        """Bad input: a 5.0 client gets DISCONNECT with the reason code, then the close (the
        will is published: this is not a normal disconnect)."""
        if self.state == CLOSING:
            return
        log.warning("MQTT connection %s (client %s): %s; closing (reason 0x%02X)", self.peer, self.client_id, why,
                    reason_code)
        if self.state == CONNECTED and self.version == MQTT_5:
            self.queue_out(encode(Disconnect(reason_code), MQTT_5))
        self.state = CLOSING
        self.close()

    def _send(self, packet: Packet) -> None:
        self.queue_out(encode(packet, self.version))

    def queue_out(self, data: bytes) -> None:
        """Output gathered and written once per loop turn: one system call for the PUBACKs
        and deliveries of a whole read (a write per packet cost more than the packet)."""
        out = self.out
        out.append(data)
        if len(out) == 1:
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        out = self.out
        if out:
            self.out = []
            self.write(b"".join(out))
        outbox = self.outbox
        if outbox is not None and outbox.spent and not self.closed:
            outbox.spent = False
            outbox.refill()  # QoS 0 deliveries took credit that no acknowledgement gives back

    def close(self) -> None:
        self.flush()
        super().close()

    def _pause(self, why: str) -> None:
        if not self.paused_for and self.transport is not None:
            self.transport.pause_reading()
        self.paused_for.add(why)

    def _resume(self, why: str) -> None:
        if why in self.paused_for:
            self.paused_for.discard(why)
            self._drain()
            if not self.paused_for and self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def _drain(self) -> None:
        """Handle the packets held while logging in or while an address was full, in order,
        until something holds them again."""
        while self.waiting and self.state == CONNECTED and "flow" not in self.paused_for:
            packet = self.waiting.popleft()
            self._dispatch(packet)

    # -- CONNECT ---------------------------------------------------------------------------------
    def _connect(self, c: Connect) -> None:
        if self.state != WAITING:
            self.protocol_violation(codes.PROTOCOL_ERROR, "a second CONNECT")
            return
        self.version = c.protocol_level
        self.state = CONNECTING
        self._pause("login")
        asyncio.ensure_future(self._login_guarded(c))

    async def _login_guarded(self, c: Connect) -> None:
        try:
            await self._login(c)
        except Exception:  # noqa: BLE001 - a fault of one CONNECT closes that connection alone
            log.exception("MQTT connection %s: CONNECT failed", self.peer)
            self.state = CLOSING
            self.close()

    def _refuse(self, v3_code: int, v5_code: int, why: str) -> None:
        log.warning("MQTT connection %s (client %r): refused: %s", self.peer, self.client_id, why)
        code = v5_code if self.version == MQTT_5 else v3_code
        self._send(ConnAck(False, code))
        self.state = CLOSING
        self.close()

    async def _login(self, c: Connect) -> None:
        v5 = self.version == MQTT_5
        client_id = c.client_id
        self.client_id = client_id or None
        if self.over_connection_limit:
            self._refuse(codes.V3_SERVER_UNAVAILABLE, codes.QUOTA_EXCEEDED, "over max_connections")
            return
        if v5 and c.properties.authentication_method is not None:
            self._refuse(codes.V3_NOT_AUTHORIZED, 0x8C, "enhanced authentication is not supported")
            return
        assigned = None
        if not client_id:
            if not c.clean_start and not v5 or self.version == MQTT_3_1:
                self._refuse(codes.V3_IDENTIFIER_REJECTED, codes.CLIENT_IDENTIFIER_NOT_VALID,
                             "empty client id for a persistent session")
                return
            client_id = assigned = f"hermod-{uuid.uuid4().hex}"
        password = c.password.decode("utf-8", "replace") if c.password is not None else None
        if c.username is None and not self.broker.auth.anonymous:
            self.broker.audit("login_failed", peer=self.peer, user=None, reason="no user name", via="mqtt")
            self._refuse(codes.V3_NOT_AUTHORIZED, codes.NOT_AUTHORIZED, "no user name and anonymous is off")
            return
        principal, why = await self.login(c.username, password)
        if self.closed:
            return
        if principal is None:
            if "limit" in why:
                self._refuse(codes.V3_SERVER_UNAVAILABLE, codes.QUOTA_EXCEEDED, why)
            else:
                self._refuse(codes.V3_BAD_USER_NAME_OR_PASSWORD, codes.BAD_USER_NAME_OR_PASSWORD, why)
            return
        self.client_id = client_id
        registry = sessions_of(self.broker, self.loop)
        session = registry.find(client_id)
        if session is not None and not self.broker.authorization.may_take_over(principal, session.user):
            self._refuse(codes.V3_NOT_AUTHORIZED, codes.NOT_AUTHORIZED,
                         f"client id {client_id} is another user's session")
            return
        if session is not None and session.connection is not None:
            session.connection.taken_over()
        if session is not None and c.clean_start:
            registry.end(session)
            session = None
        present = session is not None
        if session is None:
            session = Session(client_id, principal.name)
            registry.by_id[client_id] = session
        for timer in (session.expiry_timer, session.will_timer):
            if timer is not None:
                timer.cancel()
        session.expiry_timer = session.will_timer = None
        session.connection = self
        self.session = session
        if v5:
            session.expiry_s = c.properties.session_expiry_interval or 0
        else:
            session.expiry_s = 0 if c.clean_start else NEVER
        props = c.properties
        self.outbox = Outbox(self.queue_out, self.version, props.receive_maximum or 65535,
                             props.maximum_packet_size, props.topic_alias_maximum or 0,
                             self.broker.postoffice.clock.now_ms)
        if c.will is not None:
            w = c.will
            try:
                validate_topic_name(w.topic)
            except MqttError as e:
                self.protocol_violation(e.reason_code, str(e))
                return
            self.will = PendingWill(w.topic, w.payload, w.qos, w.retain, w.properties, principal, client_id)
        keep_alive = c.keep_alive
        ack_props: dict = {}
        if v5:
            if keep_alive == 0 or keep_alive > MAX_KEEP_ALIVE:
                keep_alive = MAX_KEEP_ALIVE
                ack_props["server_keep_alive"] = keep_alive
            if assigned is not None:
                ack_props["assigned_client_identifier"] = assigned
            ack_props["receive_maximum"] = RECEIVE_MAXIMUM
            ack_props["topic_alias_maximum"] = TOPIC_ALIAS_MAXIMUM
            ack_props["maximum_packet_size"] = self.max_message_size
        self.keep_alive = keep_alive
        self.state = CONNECTED
        self._send(ConnAck(present, 0, Properties(**ack_props) if ack_props else EMPTY))
        log.info("MQTT client %s connected from %s as %s (level %d, session %s)", client_id, self.peer,
                 principal.name, self.version, "resumed" if present else "new")
        if keep_alive:
            self._arm_keep_alive()
        self._resume_session(session)
        self._resume("login")

    def _resume_session(self, session: Session) -> None:
        outbox = self.outbox
        assert outbox is not None
        if session.releasing:
            outbox.resume_releasing(session.releasing)
            session.releasing = []
        for sub in list(session.subscriptions.values()):
            try:
                self._attach(sub)
            except HermodError as e:
                log.warning("MQTT client %s: subscription %s not resumed: %s", self.client_id, sub.filter, e)
                session.subscriptions.pop(sub.filter, None)
        outbox.refill()

    def _attach(self, sub: Subscription) -> None:
        session = self.session
        assert session is not None and self.outbox is not None
        sub.session = session
        req = sub.request(session.client_id, session.persistent, self.principal.name if self.principal else None,
                          session.expiry_s)
        with self.broker.acting_as(self.principal):
            sub.consumer = self.broker.attach_consumer(req, sub, owner=self)
        sub.queue = sub.consumer.queue
        sub.consumer.blocked = not self.writable
        self.outbox.subscriptions.append(sub)

    # -- keep-alive -------------------------------------------------------------------------------
    def _arm_keep_alive(self) -> None:
        self.alive_timer = self.loop.call_later(self.keep_alive * 1.5, self._check_alive)

    def _check_alive(self) -> None:
        self.alive_timer = None
        if self.closed or self.state != CONNECTED:
            return
        silent = self.loop.time() - self.last_heard
        limit = self.keep_alive * 1.5
        if silent >= limit:
            log.warning("MQTT client %s (%s) silent for %.1f s, past 1.5 x its keep-alive of %d s; closing",
                        self.client_id, self.peer, silent, self.keep_alive)
            self.protocol_violation(0x8D, "keep-alive timeout")
            return
        self.alive_timer = self.loop.call_later(limit - silent, self._check_alive)

    # -- PUBLISH in ---------------------------------------------------------------------------------
    def _on_publish(self, p: Publish) -> None:
        v5 = self.version == MQTT_5
        topic = p.topic
        props = p.properties
        if v5 and props is not EMPTY:
            alias = props.topic_alias
            if alias is not None:
                if alias > TOPIC_ALIAS_MAXIMUM:
                    raise MqttError(codes.TOPIC_ALIAS_INVALID, f"topic alias {alias} over the maximum")
                if topic:
                    self.aliases_in[alias] = topic
                else:
                    found = self.aliases_in.get(alias)
                    if found is None:
                        raise MqttError(codes.PROTOCOL_ERROR, f"unknown topic alias {alias}")
                    topic = found
            if props.subscription_identifiers:
                raise MqttError(codes.PROTOCOL_ERROR, "a PUBLISH from a client with a subscription identifier")
            if alias is not None:
                props = props._replace(topic_alias=None, order=())
        if topic.startswith("$share/") or not topic:
            raise MqttError(codes.TOPIC_NAME_INVALID, f"topic name {topic!r}")
        session = self.session
        assert session is not None
        qos = p.qos
        pid = p.packet_id
        if qos == 2 and pid in session.awaiting_rel:
            self._send(PubRec(pid))  # a resend: it was published already
            return
        if qos == 2 and pid in session.storing_rel:
            return  # a resend while the first is being stored: its PUBREC is coming
        if qos:
            if self.unacked_in >= RECEIVE_MAXIMUM:
                if v5:
                    raise MqttError(codes.RECEIVE_MAXIMUM_EXCEEDED, "receive maximum exceeded")
            self.unacked_in += 1
            if self.unacked_in >= RECEIVE_MAXIMUM and not v5:
                self._pause("backlog")
        if v5 and props.payload_format_indicator == 1:
            try:
                p.payload.decode("utf-8")
            except UnicodeDecodeError:
                self._refuse_publish(p, codes.PAYLOAD_FORMAT_INVALID, "payload is not UTF-8")
                return
        try:
            if qos == 2 and session.persistent:
                address = self._publish_exactly_once(session, p, topic, props)
            else:
                address = publish_message(self.broker, self.principal, self.client_id, topic, p.payload, qos,
                                          p.retain, props, lambda error: self._published(p, error))
        except NotAuthorized as e:
            if v5:
                self._refuse_publish(p, codes.NOT_AUTHORIZED, str(e))
            else:  # 3.1.1 cannot refuse: acknowledged and dropped (logged and audited by the decision)
                log.warning("MQTT client %s: publish to %s dropped: %s", self.client_id, topic, e)
                self._published(p, None)
            return
        except HermodError as e:
            if v5:
                self._refuse_publish(p, reason_for(e), str(e))
            else:
                self.protocol_violation(codes.UNSPECIFIED_ERROR, f"publish to {topic} refused: {e}")
            return
        if blocked(self.broker.postoffice, address):
            self._pause("flow")
            self.broker.postoffice.flow.wait(self, lambda: self._resume("flow"))

    def _publish_exactly_once(self, session: Session, p: Publish, topic: str, props: Properties) -> str:
        """A persistent session's QoS 2 PUBLISH and the record of its packet identifier, in
        one journal unit (qos2.py)."""
        po = self.broker.postoffice
        assert p.packet_id is not None
        txn = qos2.transaction(po)
        refused: list[BaseException] = []
        address = publish_message(self.broker, self.principal, self.client_id, topic, p.payload, 2, p.retain, props,
                                  lambda error: refused.append(error) if error is not None else None, txn)
        if refused:
            txn.rollback()
            self._published(p, refused[0])
            return address
        session.storing_rel.add(p.packet_id)
        qos2.add_record(po, txn, session.client_id, session.awaiting_rel | session.storing_rel)
        txn.commit(po, lambda error: self._published(p, error))
        return address

    def _refuse_publish(self, p: Publish, code: int, why: str) -> None:
        log.info("MQTT client %s: publish to %s refused (0x%02X): %s", self.client_id, p.topic, code, why)
        if p.qos == 0:
            if self.version == MQTT_5 and code == codes.PAYLOAD_FORMAT_INVALID:
                self.protocol_violation(code, why)
            return
        self._acked_in()
        assert p.packet_id is not None
        ack = PubAck if p.qos == 1 else PubRec
        self._send(ack(p.packet_id, code, Properties(reason_string=why[:200]) if self.version == MQTT_5 else EMPTY))

    def _published(self, p: Publish, error: BaseException | None) -> None:
        session = self.session
        if p.qos == 2 and session is not None and p.packet_id in session.storing_rel:
            session.storing_rel.discard(p.packet_id)
            if error is None:
                session.awaiting_rel.add(p.packet_id)  # stored: kept even if the client has gone
        if self.closed:
            return
        if error is not None:
            if self.version == MQTT_5:
                self._refuse_publish(p, reason_for(error), str(error))
            else:
                self.protocol_violation(codes.UNSPECIFIED_ERROR, f"publish to {p.topic} failed: {error}")
            return
        if p.qos == 1:
            self._acked_in()
            self._send(PubAck(p.packet_id))  # type: ignore[arg-type]
        elif p.qos == 2:
            assert self.session is not None and p.packet_id is not None
            self.session.awaiting_rel.add(p.packet_id)
            self._send(PubRec(p.packet_id))

    def _acked_in(self) -> None:
        self.unacked_in = max(0, self.unacked_in - 1)
        if self.unacked_in < RECEIVE_MAXIMUM // 2:
            self._resume("backlog")

    def _on_pubrel(self, p: PubRel) -> None:
        session = self.session
        assert session is not None
        if p.packet_id in session.awaiting_rel:
            session.awaiting_rel.discard(p.packet_id)
            self._acked_in()
            if session.persistent:  # the record without it is stored before PUBCOMP frees it
                qos2.save(self.broker.postoffice, session.client_id, session.awaiting_rel | session.storing_rel,
                          lambda error: self._send(PubComp(p.packet_id)) if not self.closed else None)
            else:
                self._send(PubComp(p.packet_id))
        else:
            self._send(PubComp(p.packet_id, 0x92 if self.version == MQTT_5 else 0))

    # -- acknowledgements of deliveries ------------------------------------------------------------
    def _on_puback(self, p: PubAck) -> None:
        assert self.outbox is not None
        if self.outbox.puback(p.packet_id):
            self.outbox.refill()

    def _on_pubrec(self, p: PubRec) -> None:
        assert self.outbox is not None
        self.outbox.pubrec(p.packet_id, p.reason_code)
        self.outbox.refill()

    def _on_pubcomp(self, p: PubComp) -> None:
        assert self.outbox is not None
        if self.outbox.pubcomp(p.packet_id):
            self.outbox.refill()

    # -- SUBSCRIBE / UNSUBSCRIBE --------------------------------------------------------------------
    def _on_subscribe(self, s: Subscribe) -> None:
        session = self.session
        assert session is not None and self.outbox is not None
        v5 = self.version == MQTT_5
        identifier = s.properties.subscription_identifiers[0] if s.properties.subscription_identifiers else None
        codes_out: list[int] = []
        for wanted in s.subscriptions:
            try:
                validate_topic_filter(wanted.filter)
            except MqttError as e:
                codes_out.append(e.reason_code if v5 else 0x80)
                continue
            existing = session.subscriptions.get(wanted.filter)
            if existing is not None:
                existing.qos, existing.no_local = wanted.qos, wanted.no_local
                existing.retain_as_published, existing.retain_handling = wanted.retain_as_published, \
                    wanted.retain_handling
                existing.identifier = identifier
                if existing.consumer is not None and session.persistent:
                    existing.consumer.queue.extra[EXTRA_KEY] = {**existing.options(), "client": session.client_id}
                codes_out.append(wanted.qos)
                if wanted.retain_handling == 0 and existing.group is None and existing.consumer is not None:
                    self._send_retained(existing)
                continue
            if len(session.subscriptions) >= MAX_SUBSCRIPTIONS:
                codes_out.append(codes.QUOTA_EXCEEDED if v5 else 0x80)
                continue
            sub = Subscription(wanted.filter, wanted.qos, wanted.no_local, wanted.retain_as_published,
                               wanted.retain_handling, identifier)
            try:
                self._attach(sub)
            except HermodError as e:
                log.info("MQTT client %s: subscription to %s refused: %s", self.client_id, wanted.filter, e)
                codes_out.append(reason_for(e) if v5 else 0x80)
                continue
            session.subscriptions[sub.filter] = sub
            codes_out.append(wanted.qos)
            if sub.retain_handling != 2 and sub.group is None:
                self._send_retained(sub)
        self._send(SubAck(s.packet_id, codes_out))
        self.outbox.refill()

    def _send_retained(self, sub: Subscription) -> None:
        shared = parse_shared(sub.filter)
        inner = shared.filter if shared is not None else sub.filter
        authorization = self.broker.authorization
        principal = self.principal
        may = (lambda address: authorization.allows(principal, "consume", address)) if authorization.enabled else None
        retained.send_on_subscribe(self.broker.postoffice, inner, sub.consumer.queue, may)

    def _on_unsubscribe(self, u: Unsubscribe) -> None:
        session = self.session
        assert session is not None and self.outbox is not None
        out = []
        for topic_filter in u.filters:
            sub = session.subscriptions.get(topic_filter)
            if sub is None:
                out.append(0x11)  # no subscription existed
                continue
            if sub.consumer is not None and session.persistent and sub.group is None:
                denial = self.broker.subscription_delete_denial(self.principal, sub.consumer.queue)
                if denial is not None:
                    out.append(codes.NOT_AUTHORIZED)
                    continue
            if sub in self.outbox.subscriptions:
                self.outbox.subscriptions.remove(sub)
            self._give_back(sub)
            drop_subscription(self.broker.postoffice, session, sub)
            out.append(0)
        self._send(UnsubAck(u.packet_id, out if self.version == MQTT_5 else []))

    def _give_back(self, sub: Subscription) -> None:
        """Deliveries in flight on `sub` go back to its queue (unsubscribing)."""
        outbox = self.outbox
        if outbox is None or sub.consumer is None:
            return
        for pid, (ref, _qos, _state) in list(outbox.in_flight.items()):
            if ref is not None and ref.consumer is sub.consumer:  # type: ignore[attr-defined]
                del outbox.in_flight[pid]

    # -- PINGREQ, DISCONNECT ----------------------------------------------------------------------
    def _on_ping(self, p: PingReq) -> None:
        self._send(PingResp())

    def _on_disconnect(self, d: Disconnect) -> None:
        session = self.session
        if self.version == MQTT_5 and d.properties.session_expiry_interval is not None and session is not None:
            if session.expiry_s == 0 and d.properties.session_expiry_interval:
                self.protocol_violation(codes.PROTOCOL_ERROR, "session expiry set at DISCONNECT after 0 at CONNECT")
                return
            session.expiry_s = d.properties.session_expiry_interval
        self.clean_end = d.reason_code != 0x04  # 0x04: disconnect with will message
        log.info("MQTT client %s disconnected (reason 0x%02X)", self.client_id, d.reason_code)
        self.state = CLOSING
        self.close()

    # -- takeover, writability, close -----------------------------------------------------------------
    def taken_over(self) -> None:
        """Another connection with this client id takes the session: this one ends now, its
        deliveries in flight go back (counted as attempts), its will is published."""
        log.info("MQTT client %s: session taken over by a new connection; closing %s", self.client_id, self.peer)
        if self.version == MQTT_5 and self.state == CONNECTED:
            self._send(Disconnect(0x8E))
        self.state = CLOSING
        self._release(attempted=True)
        will, self.will = self.will, None
        if will is not None:
            publish_will(self.broker, will)
        self.session = None
        self.close()

    def writability_changed(self) -> None:
        session = self.session
        if session is None:
            return
        for sub in session.subscriptions.values():
            c = sub.consumer
            if c is not None:
                c.blocked = not self.writable
                if self.writable:
                    c.queue.host.schedule(c.queue)

    def _release(self, attempted: bool) -> None:
        """Detach the session's consumers: what they had in flight goes back to their queues
        (QoS 2 deliveries the client has already received stay done: their PUBRELs are owed)."""
        session = self.session
        outbox = self.outbox
        if session is None:
            return
        if outbox is not None:
            owed = outbox.releasing()
            for pid in owed:
                ref = outbox.in_flight[pid][0]
                if ref is not None:
                    ref.queue.acknowledge(ref)  # type: ignore[attr-defined]
            session.releasing = owed if session.persistent else []
            outbox.in_flight.clear()
            outbox.subscriptions.clear()
        po = self.broker.postoffice
        for sub in session.subscriptions.values():
            consumer, sub.consumer = sub.consumer, None
            if consumer is not None:
                core_links.detach_consumer(po, consumer, attempted=attempted)
        session.connection = None
        if not session.persistent:
            session.awaiting_rel.clear()

    def on_closed(self, exc: BaseException | None) -> None:
        if self.alive_timer is not None:
            self.alive_timer.cancel()
            self.alive_timer = None
        self.broker.postoffice.flow.forget(self)
        session = self.session
        if session is None:
            return
        self._release(attempted=not self.clean_end)
        self.session = None
        will, self.will = self.will, None
        registry = sessions_of(self.broker, self.loop)
        if will is not None and not self.clean_end:
            delay = will.properties.will_delay_interval or 0 if self.version == MQTT_5 else 0
            delay = min(delay, session.expiry_s)
            if delay <= 0:
                publish_will(self.broker, will)
            else:
                session.will_timer = self.loop.call_later(delay, publish_will, self.broker, will)
        for sub in session.subscriptions.values():  # what a restart would find (kept in memory)
            options = sub.queue_options()
            if options is not None:
                options["expiry"] = session.expiry_s
        registry.expire_later(session, self.loop)

    def refuse_and_close(self, reason: str) -> None:
        if self.state == CONNECTED and self.version == MQTT_5:
            self._send(Disconnect(0x8B if "shutting down" in reason else 0x98))
        self.state = CLOSING
        self.close()

    def describe_links(self) -> list[dict]:
        session = self.session
        if session is None:
            return []
        return [{"name": sub.filter, "role": "sender", "address": sub.pattern,
                 "queue": sub.consumer.queue.name if sub.consumer is not None else None, "qos": sub.qos}
                for sub in session.subscriptions.values()]


_HANDLERS: dict[type, Callable[[MqttConnection, Any], None]] = {
    Publish: MqttConnection._on_publish,
    PubAck: MqttConnection._on_puback,
    PubRec: MqttConnection._on_pubrec,
    PubRel: MqttConnection._on_pubrel,
    PubComp: MqttConnection._on_pubcomp,
    Subscribe: MqttConnection._on_subscribe,
    Unsubscribe: MqttConnection._on_unsubscribe,
    PingReq: MqttConnection._on_ping,
    Disconnect: MqttConnection._on_disconnect,
}

__all__ = ["MqttConnection"]
