"""Flow control under pressure: per-address `max_size_bytes` with `address_full_policy`, and a
memory limit for the whole broker, so a flood of messages never runs the broker out of memory.

When an address holds `max_size_bytes` or more in memory:

- `page`: new messages go to the store only (durable queues on a durable store) or to the
  paging spool (every other queue: temporary files, see `broker/spool.py`); each queue keeps a
  window in memory and reads the rest back as consumers drain it (with neither a durable store
  nor a spool, `page` acts as `block`);
- `block`: producers get no more credit until there is room again;
- `fail`: new messages are rejected with `amqp:resource-limit-exceeded` ("Address is full");
- `drop`: new messages are accepted and thrown away.

Over the broker-wide limit, every producer is blocked. The broker's memory counts the messages
on queues, those in journal units not yet committed (a store slower than its producers
must hold them back, not buffer them), and what clients have sent of something not yet complete
(a multi-frame transfer, a partial frame of any protocol): an adapter `reserve`s those bytes
before it buffers them, and a reservation that would go over the limit is refused, so the
adapter refuses the transfer (AMQP: its link detached with `amqp:resource-limit-exceeded`).
`Unfinished` is that buffer with its reservation, for any adapter. `PartialFrame` counts the
frame a connection has begun and not finished, which sits in the protocol engine's input buffer
(Proton's, up to `max_frame_size` a connection): such frames together may hold at most
FRAMES_SHARE of the limit, so many connections each holding most of a large frame cannot take
the room messages need; the first FRAME_ALLOWANCE bytes of each are counted but never refused.

The journal budget paces producers by the store: credit is granted (at attach, and as a
producer's own units commit) only out of what is left of `JOURNAL_BUDGET_UNITS` units handed
to the store and not committed yet, so however many producers send, the journal holds about
that many units and a durable send waits about budget / commit rate for its `accepted`.
Credit already granted is honoured, so the budget is checked at each grant, not per transfer.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .address import Address
    from .ports import FlowHost

PAGE, BLOCK, FAIL, DROP = "page", "block", "fail", "drop"
RESUME_AT = 0.9  # blocked producers resume below this share of a limit
# Memory a queued message takes besides its encoded bytes (Ref, Message and its decoded
# envelope, the backlog's entry): measured at about 410 bytes; the memory limit counts it.
REF_OVERHEAD_BYTES = 512
# Units in the journal, all producers together. SQLite FULL commits about 6-7k sends/s here
# (issue 18: Q1D), so 10,000 is about 1.5 s of the store's work: more only adds latency (and
# memory: the 578 MiB measured with 100k uncommitted sends), not throughput, since one commit
# already takes everything pending.
JOURNAL_BUDGET_UNITS = 10_000
# The start of an unfinished frame fits in the input buffer every connection has anyway (Proton
# allocates 16 KiB): counted, but never refused, so a client's small frames always go through.
FRAME_ALLOWANCE = 16 * 1024
# Unfinished frames of all connections together may hold at most this share of the memory
# limit (issue 28, finding 12: 20 connections x 4 MiB frames held 80 MiB, none of it counted).
FRAMES_SHARE = 0.5


def default_memory_limit() -> int:
    """A quarter of the machine's memory (256 MiB to 8 GiB); `[server] max_memory_mb` overrides."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 * 1024 ** 3
    return max(256 * 1024 ** 2, min(8 * 1024 ** 3, total // 4))


class FlowControl:
    def __init__(self, host: FlowHost, memory_limit: int | None = None,
                 journal_budget: int = JOURNAL_BUDGET_UNITS):
        self.host = host  # the post office, seen through what flow control needs of it
        self.memory_limit = memory_limit if memory_limit is not None else default_memory_limit()
        self.journal_budget = journal_budget
        self.memory_used = 0  # bytes of messages on all queues, with their refs' overhead
        # A queued message costs about this much memory besides its encoded bytes (a Ref, a
        # Message with its decoded envelope, the backlog's entry; measured at ~410 bytes).
        self.ref_overhead = REF_OVERHEAD_BYTES
        self.pending_bytes = 0  # messages in journal units not committed yet
        self.pending_units = 0  # those units
        self.reserved = 0  # bytes of unfinished transfers and frames held for clients (`reserve`)
        self.frames = 0  # of those, bytes of unfinished frames (`PartialFrame`)
        self._waiting: dict[object, Callable[[], None]] = {}  # blocked producers' resume callbacks
        self._wake_scheduled = False

    # -- accounting ------------------------------------------------------------------------------
    def account(self, address: Address, delta: int, refs: int = 0) -> None:
        """Bytes of messages on the queues of `address` (or held for it by a transaction) changed
        by `delta`, and `refs` messages came (or went); the memory limit also counts each
        ref's estimated Python overhead (`ref_overhead`). Flow control is the only writer of
        `address.size` and `memory_used` (a message coming: `arrived`)."""
        address.size += delta
        self.memory_used += delta + refs * self.ref_overhead
        if delta < 0:
            self.released()

    def arrived(self, address: Address, size: int) -> None:
        """One message of `size` bytes came onto a queue of `address` (`Queue.enqueue`):
        `account(address, size, 1)` without its release check (adding wakes no one)."""
        address.size += size
        self.memory_used += size + self.ref_overhead

    def reserve(self, nbytes: int) -> bool:
        """Count `nbytes` of something a client has not finished sending, before they are
        buffered: True, and they count until `release`d; False (nothing counted) when they
        would take the broker over its memory limit: the caller refuses what they belong to."""
        if self.memory_used + self.pending_bytes + self.reserved + nbytes > self.memory_limit:
            return False
        self.reserved += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Reserved bytes are no longer held (the transfer completed, and its message is counted
        as usual from now on, or it was aborted, or its link or connection ended)."""
        if nbytes:
            self.reserved -= nbytes
            self.released()

    @staticmethod
    def full(address: Address) -> bool:
        """Does `address` hold its `max_size_bytes` or more (its policy applies to new messages)?"""
        return 0 <= address.limit <= address.size

    def room(self, share: float = 1.0) -> float:
        """Bytes left under `share` of the memory limit (negative when over it)."""
        return self.memory_limit * share - self.memory_used

    # -- decisions -------------------------------------------------------------------------------
    def verdict(self, address_name: str | None) -> str | None:
        """What to do with a new message for `address_name` now: None (go ahead), or a policy."""
        po = self.host
        if address_name is not None:
            address = po.addresses.get(address_name)
            if address is not None and self.full(address):
                policy = po.settings_for(address_name).address_full_policy
                if policy == PAGE and not po.journal.durable and po.spool is None:
                    return BLOCK
                return policy
        if self.memory_used + self.pending_bytes + self.reserved >= self.memory_limit:
            return BLOCK
        return None

    def may_grant_credit(self, address_name: str | None) -> bool:
        return self.verdict(address_name) not in (BLOCK,)

    def journal_room(self) -> int:
        """How many more units the journal budget allows now (credit is granted out of it)."""
        return self.journal_budget - self.pending_units

    def unit_submitted(self, nbytes: int) -> None:
        """A journal unit holding `nbytes` of messages went to the store."""
        self.pending_bytes += nbytes
        self.pending_units += 1

    def unit_done(self, nbytes: int, units: int = 1) -> None:
        """That unit committed (its messages are now on their queues, counted there) or failed.
        `units`: the sends of a unit of parts (`core.bursts`), each counted as a unit here."""
        self.pending_bytes -= nbytes
        self.pending_units -= units
        self.released()

    def wait(self, key: object, resume: Callable[[], None]) -> None:
        """A producer that was refused credit: `resume()` once there may be room."""
        self._waiting[key] = resume

    def forget(self, key: object) -> None:
        self._waiting.pop(key, None)

    def released(self) -> None:
        """Messages left memory: wake blocked producers (once per reactor turn)."""
        if self._waiting and not self._wake_scheduled:
            self._wake_scheduled = True
            self.host.defer(self._wake)

    def _wake(self) -> None:
        self._wake_scheduled = False
        waiting, self._waiting = self._waiting, {}
        for resume in waiting.values():
            resume()  # a producer still over a limit registers again

    def pages(self, queue) -> bool:
        """Does a new message for `queue` go to the store only (page policy)?"""
        if queue.paged:
            return True  # keep order: once paging, a queue pages until it has read everything back
        if not queue.stores and self.host.spool is None:
            return False
        address = queue.address
        settings = self.host.settings_for(address.name)
        return (settings.address_full_policy == PAGE and 0 <= settings.max_size_bytes <= address.size)


class Unfinished:
    """The bytes so far of one transfer a client has not finished (a multi-frame AMQP transfer;
    a partial frame of another protocol), counted against the memory limit while held. `add`
    reserves before anything is buffered; `take` hands the whole out and gives the reservation
    back (the message is counted as usual from then on); `drop` throws it away."""

    __slots__ = ("flow", "_buffer", "_counted")

    def __init__(self, flow: FlowControl):
        self.flow = flow
        self._buffer: bytearray | None = None
        self._counted = 0

    def __len__(self) -> int:
        return self._counted

    @property
    def started(self) -> bool:
        return self._buffer is not None

    def reserve(self, nbytes: int) -> bool:
        """Reserve `nbytes` more (True), or False when that would go over the memory limit."""
        if not self.flow.reserve(nbytes):
            return False
        self._counted += nbytes
        return True

    def add(self, chunk: bytes) -> None:
        """Buffer `chunk`, whose size `reserve` counted."""
        if self._buffer is None:
            self._buffer = bytearray(chunk)
        else:
            self._buffer += chunk

    def take(self) -> bytes:
        """The whole transfer, and the reservation given back: its message is counted as usual
        from now on."""
        buffer, self._buffer = self._buffer, None
        data = bytes(buffer) if buffer is not None else b""
        del buffer
        self.flow.release(self._counted)
        self._counted = 0
        return data

    def drop(self) -> None:
        self._buffer = None
        self.flow.release(self._counted)
        self._counted = 0


class PartialFrame:
    """The frame one connection has begun and not finished, held in its protocol engine's input
    buffer: its bytes so far count against the memory limit (`FlowControl.reserved`, and
    `frames` for the share unfinished frames may take). The adapter calls `hold` with the new
    length after each read, before handing the bytes to the engine, and `drop` when the
    connection ends."""

    __slots__ = ("flow", "held")

    def __init__(self, flow: FlowControl):
        self.flow = flow
        self.held = 0

    def hold(self, nbytes: int) -> bool:
        """The unfinished frame is now `nbytes` long (0: the input ends on a frame boundary).
        False, and nothing counted, when it would take unfinished frames past FRAMES_SHARE of the
        limit (beyond its first FRAME_ALLOWANCE bytes): the adapter refuses the connection
        before buffering them. The rest of the limit is not asked here: a frame that completes
        a transfer's part is counted again by that transfer (`Unfinished`), whose own check
        refuses it on its link, as the contract wants, rather than the whole connection. So the
        broker holds at most the limit plus FRAMES_SHARE of it, all of it counted."""
        delta = nbytes - self.held
        if not delta:
            return True
        flow = self.flow
        if delta > 0 and nbytes > FRAME_ALLOWANCE and flow.frames + delta > flow.memory_limit * FRAMES_SHARE:
            return False
        self.held = nbytes
        flow.frames += delta
        flow.reserved += delta
        if delta < 0:
            flow.released()
        return True

    def drop(self) -> None:
        self.hold(0)
