"""One STOMP client connection: bytes in through the sans-IO parser, frames handled in order.

The first frame must be CONNECT or STOMP: the version is negotiated (the parser then reads what
the client pipelined behind it, escaped per that version), `login`/`passcode` checked through
the shared login (`ClientConnection.login`: the throttle, anonymous where allowed, the per-user
limit, audit), and CONNECTED names the version, the heart-beats and a session. Frames wait in
`held` while something must finish first (the login; a SEND under the `block` policy), and the
socket is not read meanwhile, so they cannot pile up.

Bad input of any kind (the parser's StompError, a refused SEND or SUBSCRIBE, an unknown ACK) is
answered with an ERROR frame carrying `message` (and `receipt-id` when the frame asked for a
receipt), after the answers to the frames before it; then the connection closes (specification).
A connection that ends without DISCONNECT gives its unacknowledged messages back counted as a
delivery attempt; after DISCONNECT they go back uncounted.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from typing import TYPE_CHECKING

from ...core.errors import HermodError, ResourceLimitExceeded
from ...core.publishing import blocked
from ...mapping.stomp import MappingError
from ...stomp import (HEARTBEAT, VERSIONS, Frame, FrameParser, Heartbeat, Limits, StompError, UnsupportedVersion,
                      encode_frame, negotiate_heart_beat, negotiate_version)
from ..connection import ClientConnection
from .answers import HANDLED, Answers, Slot
from .heartbeats import SERVER_HEART_BEAT, Heartbeats
from .producer import WAIT, Producer
from .refusals import Goodbye, LoginRefused, refusal
from .subscriptions import Subscriptions
from .temporaries import Temporaries
from .transactions import StompTransactions

if TYPE_CHECKING:
    from ...security.auth import Principal

log = logging.getLogger("hermod.stomp")

CLOSE_GRACE_S = 5.0  # after an ERROR, a client that does not read its last frames is cut off
CONNECT_TIMEOUT_S = 10.0  # from hand-over to CONNECTED
OUTPUT_BATCH = 256 * 1024  # frames gathered for one socket write, at most


class StompConnection(ClientConnection):
    protocol_name = "stomp"

    def __init__(self, server, listener) -> None:
        super().__init__(server, listener)
        self.parser = FrameParser(Limits(max_frame_size=self.max_message_size))
        self.version: str | None = None
        self.connected = False
        self.session = uuid.uuid4().hex[:16]
        self.held: deque[Frame | Heartbeat] = deque()
        self.waiting = False  # a login or a blocked SEND holds the frames behind it
        self.ending = False  # an ERROR is on its way, or DISCONNECT came: nothing more is handled
        self.clean = False  # DISCONNECT: the client meant to go
        self.parse_error: Exception | None = None  # the bytes' fault, answered after the frames before it
        self.answers = Answers(self)
        self.heartbeats: Heartbeats | None = None
        self.producer = Producer(self)
        self.subscriptions = Subscriptions(self)
        self.transactions = StompTransactions(self)
        self.temporaries = Temporaries(self)
        self._timer: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_due = False

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if not self.closed:
            self.heartbeats = Heartbeats(self)
            self._timer = self.server.loop.call_later(CONNECT_TIMEOUT_S, self._connect_timeout)

    # -- input --------------------------------------------------------------------------------------
    def received(self, data: bytes) -> None:
        if self.heartbeats is not None:
            self.heartbeats.touch()
        if self.ending or self.parse_error is not None:
            return
        self._feed(data)
        self.drain()

    def _feed(self, data: bytes) -> None:
        try:
            frames = self.parser.feed(data)
        except StompError as e:
            frames = e.frames
            self.parse_error = e
        self.held.extend(frames)
        self._count_unfinished()

    def _count_unfinished(self) -> None:
        """The bytes of a frame not yet complete count against `max_memory_mb` (contract)."""
        now = self.parser.buffered() if self.parse_error is None else 0
        if not self.hold_unfinished(now):
            self.parse_error = self.parse_error or ResourceLimitExceeded(
                f"the broker's memory limit is reached: an unfinished frame of {now} bytes is refused")

    def drain(self) -> None:
        """Handle the held frames in order, until one must wait or the connection ends."""
        held = self.held
        while held and not self.waiting and not self.ending:
            item = held.popleft()
            if item is HEARTBEAT:
                continue
            assert isinstance(item, Frame)
            self._handle(item)
        if not held and not self.waiting and not self.ending and self.parse_error is not None:
            self.fail(self.parse_error)

    def _handle(self, frame: Frame) -> None:
        command = frame.command
        try:
            if not self.connected:
                if command not in ("CONNECT", "STOMP"):
                    raise StompError(f"{command} before CONNECT")
                self._connect(frame)
                return
            handler = _HANDLERS.get(command)
            if handler is None:
                raise StompError(f"{command} is not allowed once connected")
            result = handler(self, frame)
        except Exception as e:  # noqa: BLE001 - every refusal is an ERROR frame, the broker carries on
            if not isinstance(e, (StompError, HermodError, MappingError, OSError, Goodbye)):
                log.exception("STOMP %s from %s failed", command, self.peer)
            self.fail(e, frame)
            return
        if result is WAIT:
            self.held.appendleft(frame)
            return
        if result is not HANDLED:
            receipt = frame.header("receipt")
            if receipt is not None:
                self.answers.add(self.receipt(receipt))

    # -- CONNECT ------------------------------------------------------------------------------------
    def _connect(self, frame: Frame) -> None:
        version = negotiate_version(frame.header("accept-version"))
        send_ms = receive_ms = 0
        if version != "1.0":
            send_ms, receive_ms = negotiate_heart_beat(frame.header("heart-beat"), SERVER_HEART_BEAT)
        self.version = version
        if self.over_connection_limit:
            raise Goodbye("too many connections: the broker is at max_connections")
        self.client_id = frame.header("client-id")
        self.waiting = True
        self._pause()
        login = frame.header("login") or None  # an empty login is none (Classic's clients send one)
        passcode = frame.header("passcode") if login is not None else None
        task = self.server.loop.create_task(self._login(frame, login, passcode, send_ms, receive_ms))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _login(self, frame: Frame, login: str | None, passcode: str | None, send_ms: int,
                     receive_ms: int) -> None:
        if login is not None and passcode is None:
            passcode = ""
        principal, why = await self.login(login, passcode)
        if self.closed:
            return
        if principal is None:
            self.fail(LoginRefused(why), frame)
            return
        self._connected(frame, principal, send_ms, receive_ms)

    def _connected(self, frame: Frame, principal: Principal, send_ms: int, receive_ms: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.connected = True
        headers = [("version", self.version or "1.0"), ("server", "Hermod"), ("session", self.session)]
        if self.version != "1.0":
            headers.append(("heart-beat", f"{send_ms},{receive_ms}"))
        self.write(encode_frame("CONNECTED", headers, b"", self.version))
        if self.heartbeats is not None:
            self.heartbeats.start(send_ms, receive_ms)
        log.debug("STOMP %s connected from %s as %s", self.version, self.peer, principal.name)
        self.parser.version = self.version
        self.waiting = False
        self._resume()
        if self.parse_error is None:
            self._feed(b"")
        self.drain()

    def _connect_timeout(self) -> None:
        self._timer = None
        if not self.connected and not self.closed:
            self.drop("no CONNECT frame within %d s" % CONNECT_TIMEOUT_S)

    # -- output: one socket write per loop turn -----------------------------------------------------
    def write(self, data: bytes) -> None:
        """Frames are gathered and written once per loop turn (a write is a system call: one per
        MESSAGE was most of the broker's time under load), at once past OUTPUT_BATCH bytes so
        the socket's write mark still pauses the consumers in time."""
        out = self._out
        out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= OUTPUT_BATCH:
            self.flush()
        elif not self._flush_due:
            self._flush_due = True
            self.server.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_due = False
        if not self._out:
            return
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        self._out_bytes = 0
        super().write(data)

    def close(self) -> None:
        self.flush()
        super().close()

    # -- answers --------------------------------------------------------------------------------------
    def receipt(self, receipt_id: str) -> bytes:
        return encode_frame("RECEIPT", [("receipt-id", receipt_id)], b"", self.version)

    def fail(self, error: BaseException, frame: Frame | None = None, slot: Slot | None = None) -> None:
        """Answer with an ERROR frame (after the answers before it), then close."""
        if self.ending or self.closed:
            if slot is not None:
                self.answers.fill(slot, None)
            return
        self.ending = True
        self._pause()
        message = refusal(error)
        headers = [("message", message[:1000])]
        if isinstance(error, UnsupportedVersion):
            headers.append(("version", ",".join(error.supported)))
        receipt = frame.header("receipt") if frame is not None else None
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        headers.append(("content-type", "text/plain"))
        body = message
        if frame is not None:
            body += f"\n\nThe refused frame: {frame.command}"
        log.info("STOMP connection %s (%s): ERROR %s", self.peer, self.principal.name if self.principal else "-",
                 message[:300])
        data = encode_frame("ERROR", headers, body, self.version)
        if slot is not None:
            self.answers.fill(slot, data, then_close=True)
        else:
            self.answers.add(data, then_close=True)
        self.server.loop.call_later(CLOSE_GRACE_S, self.abort)

    def fail_later(self, message: str) -> None:
        self.server.loop.call_soon(self.fail, Goodbye(message))

    def drop(self, why: str) -> None:
        """The client is gone or silent: say why (it may still read), close."""
        log.info("STOMP connection %s dropped: %s", self.peer, why)
        self.fail(Goodbye(why))

    def refuse_and_close(self, reason: str) -> None:
        self.fail(Goodbye(reason))

    # -- flow ------------------------------------------------------------------------------------------
    def _pause(self) -> None:
        if self.transport is not None:
            try:
                self.transport.pause_reading()
            except (RuntimeError, AttributeError):
                pass

    def _resume(self) -> None:
        if self.transport is not None and not self.ending:
            try:
                self.transport.resume_reading()
            except (RuntimeError, AttributeError):
                pass

    def wait_for_room(self, address: str) -> None:
        """A SEND must wait (the `block` policy, or the broker's memory): stop reading until the
        flow control calls back, then go on with the held frames."""
        self.waiting = True
        self._pause()
        po = self.broker.postoffice

        def resume() -> None:
            if self.closed:
                return
            if blocked(po, address):
                po.flow.wait(self, resume)
                return
            self.waiting = False
            self._resume()
            self.drain()

        po.flow.wait(self, resume)

    def revalidate(self) -> int:
        return self.subscriptions.revalidate()

    def writability_changed(self) -> None:
        self.subscriptions.set_blocked(not self.writable)

    # -- the other frames ---------------------------------------------------------------------------
    def _disconnect(self, frame: Frame) -> object:
        self.clean = True
        self.ending = True
        receipt = frame.header("receipt")
        self.answers.add(self.receipt(receipt) if receipt is not None else None, then_close=True)
        self.server.loop.call_later(CLOSE_GRACE_S, self.abort)
        return HANDLED

    # -- management and the end -----------------------------------------------------------------------
    def describe_links(self) -> list[dict]:
        return self.subscriptions.describe()

    def on_closed(self, exc: BaseException | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.heartbeats is not None:
            self.heartbeats.stop()
        self.broker.postoffice.flow.forget(self)
        self.held.clear()
        self.transactions.rollback_all()
        self.subscriptions.close_all(attempted=not self.clean)
        self.temporaries.delete_all()


_HANDLERS = {
    "SEND": lambda c, f: c.producer.send(f),
    "SUBSCRIBE": lambda c, f: c.subscriptions.subscribe(f),
    "UNSUBSCRIBE": lambda c, f: c.subscriptions.unsubscribe(f),
    "ACK": lambda c, f: c.subscriptions.settle(f, nack=False),
    "NACK": lambda c, f: c.subscriptions.settle(f, nack=True),
    "BEGIN": lambda c, f: c.transactions.begin(f),
    "COMMIT": lambda c, f: c.transactions.commit(f),
    "ABORT": lambda c, f: c.transactions.abort(f),
    "DISCONNECT": StompConnection._disconnect,
}

__all__ = ["StompConnection", "VERSIONS"]
