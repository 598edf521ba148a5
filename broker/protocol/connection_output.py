"""A connection's output and timers (the half of `Connection` that writes): back-pressure (the
socket's write buffer and the bytes handed to Proton between two flushes pause the consumers),
the flush the server runs once per loop turn, the idle-timeout tick, our own keepalive, and the
handshake deadline.

`ConnectionOutput` is a mixin of `Connection` (protocol/connection.py); the attributes are its.
"""
from __future__ import annotations

import logging

from cproton_ffi import ffi, lib

log = logging.getLogger("hermod.connection")

TICK_EVERY_MS = 100
OUT_CHUNK = 1024 * 1024  # the shared output buffer (Server.out_buffer) at its largest
EMPTY_FRAME = b"\x00\x00\x00\x08\x02\x00\x00\x00"  # AMQP heartbeat: size 8, doff 2, type 0, channel 0
KEEPALIVE_SHARE = 3  # an empty frame after a third of the peer's idle timeout without output
# Output back-pressure, per connection. Every message byte in flight (kernel, asyncio buffer,
# Proton) is held twice (Proton keeps a sent delivery's buffer until it is settled), so a client
# that does not read may cost about 2 x (all three) before its consumers wait:
WRITE_HIGH_WATER = 1024 * 1024  # the asyncio write buffer: over it, pause_writing
OUTPUT_BUDGET = 1024 * 1024  # message bytes handed to Proton between two flushes
SOCKET_SEND_BUFFER = 1024 * 1024  # fixed SO_SNDBUF: autotuning would let the kernel take 4 MiB


class ConnectionOutput:
    """Connection's output side (a mixin; see the module docstring)."""

    def pause_writing(self) -> None:
        """The socket's buffer is over the high-water mark: the client reads slower than we
        write. Stop sending to it and stop reading from it until it catches up."""
        self.writing_paused = True
        log.debug("connection %s: output backed up; not reading from it until it drains", self.peer)
        self._block_consumers(True)
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._update_reading()
        if not self.output_full:
            self._block_consumers(False)

    def output_over(self) -> None:
        """More than OUTPUT_BUDGET message bytes went into Proton since the last flush (one
        dispatch pass can hand it many MB before the socket says anything): the consumers wait
        for the flush, and then for the socket, rather than the messages leaving their queues."""
        if not self.output_full:
            self.output_full = True
            self._block_consumers(True)

    def _block_consumers(self, blocked: bool) -> None:
        """Stop or restart sending on every link; a consumer unblocked has its queue scheduled."""
        for handler in list(self.links.values()):
            handler.set_blocked(blocked)

    def _update_reading(self) -> None:
        """Read from the client only while its output drains and the output held behind its
        settlements being stored is within OUTPUT_BUDGET (two independent reasons to stop)."""
        if self.closed:
            return
        if self.writing_paused or self.store_hold.over_budget:
            self.socket.pause_reading()
        else:
            self.socket.resume_reading()

    def flush(self) -> None:
        """Write all the transport's pending output, and re-arm the idle-timeout tick. Output
        taken after a settlement of this client was read waits until it is stored (StoreHold)."""
        if self.closed:
            return
        t = self.transport
        write = self.socket.write
        hold = self.store_hold
        wrote = hold.holding and hold.release(write)
        tap = None if self.frame_tap.output_passes() else self.frame_tap.outgoing
        server = self.server
        pending_of, peek, pop = lib.pn_transport_pending, lib.pn_transport_peek, lib.pn_transport_pop
        want = 0
        while True:
            pending = pending_of(t)
            if pending <= 0:
                break
            # Proton hands out at most the peer's max-frame-size per peek (32 KiB by default):
            # the pieces are gathered in the shared buffer and written at once, one socket write
            # a flush rather than one a frame's worth. Q1 100k x 1 KiB: 4,007 -> 846 sendto
            # calls; broker CPU s per 100k (8 interleaved reps of 150k, load 0.9-3.4, with the
            # hoisting in connection/producer/dispatch) mean 0.952 -> 0.920, medians 0.933 both.
            out, size = server.out_buffer(max(pending, want))
            filled = 0
            while pending > 0 and filled < size:
                n = peek(t, out + filled, min(pending, size - filled))
                if n < 0:
                    break
                pop(t, n)
                filled += n
                pending = pending_of(t)
            if filled:
                data = ffi.buffer(out, filled)[:]
                wrote = hold.write(data if tap is None else tap(data), write) or wrote
            if pending <= 0 or filled < size:
                break
            want = size * 2  # the buffer was too small for this flush: grow it (up to OUT_CHUNK)
        if pending < 0:
            if not hold.holding:
                # Output side done: everything is written.
                self.socket.close()
                self.closed = True
                return
        if wrote and self._keepalive_s:
            self._last_write = self.server.loop.time()
        if self.out_room != OUTPUT_BUDGET or hold.held_bytes:
            self._recount_output()
        if hold.crossed(OUTPUT_BUDGET):
            self._update_reading()
        self._arm_tick()

    def _recount_output(self) -> None:
        """After a flush, what is still in Proton is what the peer's session window holds back
        (pn_session_outgoing_bytes) and what waits for settlements to be stored; the rest is in
        the socket, which pauses writing itself. Below the mark, and with the socket not
        paused, the consumers carry on."""
        held = 0
        s = lib.pn_session_head(self.conn, 0)
        while s != ffi.NULL:
            held += lib.pn_session_outgoing_bytes(s)
            s = lib.pn_session_next(s, 0)
        self.out_room = OUTPUT_BUDGET - held - self.store_hold.held_bytes
        if self.output_full and self.out_room >= 0:
            self.output_full = False
            if not self.writing_paused:
                self._block_consumers(False)

    def _handshake_deadline(self) -> None:
        self._handshake_handle = None
        if not self.closed and not self.opened:
            log.info("connection %s did not open in time; dropping it", self.peer)
            self.socket.close()

    def _arm_tick(self) -> None:
        """Keep one timer at the transport's next deadline: the peer's idle timeout (an empty
        frame is due at half of what it advertised) or ours. Asked after every flush, at most
        every TICK_EVERY_MS, and kept when the timer already fires at or before the deadline."""
        if not self.opened or self.closed:
            return
        loop = self.server.loop
        now = int(loop.time() * 1000)
        if self._tick_handle is not None and now - self._last_tick < TICK_EVERY_MS:
            return
        self._last_tick = now
        deadline = lib.pn_transport_tick(self.transport, now)
        if not deadline:
            return
        if self._tick_handle is not None:
            if self._tick_deadline <= deadline:
                return
            self._tick_handle.cancel()
        self._tick_deadline = deadline
        self._tick_handle = loop.call_at(deadline / 1000.0, self._on_tick)

    def _keepalive(self) -> None:
        """Proton sends its empty frame only at exactly half the peer's idle timeout, measured
        from the tick that saw the last output (our ticks are throttled, so later still): a
        peer could go 3 s without a frame on a 3 s timeout. So the connection keeps its own
        promise: after a third of it without output, an empty frame. Output is always flushed
        whole, so the socket is at a frame boundary here."""
        self._keepalive_handle = None
        if self.closed:
            return
        loop = self.server.loop
        due = self._last_write + self._keepalive_s
        now = loop.time()
        if due <= now:
            self.socket.write(EMPTY_FRAME)
            self._last_write = now
            due = now + self._keepalive_s
        self._keepalive_handle = loop.call_at(due, self._keepalive)

    def _on_tick(self) -> None:
        self._tick_handle = None
        self._tick_deadline = 0
        if self.closed:
            return
        lib.pn_transport_tick(self.transport, int(self.server.loop.time() * 1000))
        self.process()  # marks the connection: the flush writes any empty frame and re-arms
