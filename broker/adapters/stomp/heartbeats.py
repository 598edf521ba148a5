"""Heart-beats as negotiated (specification, "Heart-beating"): the broker writes an EOL every
`send` ms, and drops a client from which nothing (frame or EOL) arrived for twice its `receive`
interval, the same tolerance Artemis gives (`heartBeatToConnectionTtlModifier` 2)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import StompConnection

SERVER_HEART_BEAT = (1000, 1000)  # the broker's sx,sy in ms: what it offers, at most this often
GRACE = 2.0


class Heartbeats:
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.loop: asyncio.AbstractEventLoop = conn.server.loop
        self.last_in = self.loop.time()
        self.send_s = 0.0
        self.receive_s = 0.0
        self._send_timer: asyncio.TimerHandle | None = None
        self._check_timer: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        self.last_in = self.loop.time()

    def start(self, send_ms: int, receive_ms: int) -> None:
        self.send_s, self.receive_s = send_ms / 1000, receive_ms / 1000
        if send_ms:
            self._send_timer = self.loop.call_later(self.send_s, self._beat)
        if receive_ms:
            self.touch()
            self._check_timer = self.loop.call_later(self.receive_s, self._check)

    def _beat(self) -> None:
        conn = self.conn
        if conn.closed:
            return
        if conn.writable:
            conn.write(b"\n")
        self._send_timer = self.loop.call_later(self.send_s, self._beat)

    def _check(self) -> None:
        conn = self.conn
        if conn.closed:
            return
        silent = self.loop.time() - self.last_in
        if silent > self.receive_s * GRACE:
            conn.drop(f"no heart-beat from the client for {silent:.1f} s "
                      f"(negotiated every {self.receive_s * 1000:.0f} ms)")
            return
        self._check_timer = self.loop.call_later(self.receive_s, self._check)

    def stop(self) -> None:
        for timer in (self._send_timer, self._check_timer):
            if timer is not None:
                timer.cancel()
        self._send_timer = self._check_timer = None
