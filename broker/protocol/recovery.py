"""Link recovery (AMQP 1.0 §2.6.13 resuming deliveries, §2.7.3 the attach's unsettled map) on top
of Proton's engine, which neither reports the unsettled map of a peer's attach nor sends one.

`FrameTap` watches a connection's frames on their way in (before Proton reads them) for attach
performatives and keeps the unsettled map each carried, by the peer's role and link name; on
the way out it splices the broker's own unsettled map into the attach Proton sends for a link
whose handler asked for it. It follows frame boundaries only (a header read per frame, O(1));
attach frames alone are decoded, and output that holds none passes through as it is.

`LinkMemory` is what the broker remembers of a link whose terminus is durable
(`unsettled-state`) once it is detached, keyed by container id and link name, with the user
whose link it was, in memory only (not through a restart): for a consumer link the deliveries
it had not settled (their refs, back on the queue meanwhile) and its last delivery tag; for a
producer link the tags of the transfers it accepted that the client had not settled (such a
link's accepted transfers stay unsettled at the broker until the client settles them, and a
settled one's tag is forgotten: the client may reuse it). Both are bounded (MAX_LINKS links,
MAX_TAGS tags a link), oldest first out. Only the user who made the state resumes it, and a
consumer's recovered deliveries are applied only where that user may still `consume`.

What a recovering client gets:
- a receiver re-attaching with its unsettled map: the broker's attach carries its own map (the
  tags it sent and the receiver had not settled); a delivery the receiver reports accepted or
  rejected is given that outcome if its message still waits on the queue; the others are sent
  again under the same tag (a consumer link's tags are message ids), but without the `resume`
  flag, which Proton cannot set. After a broker restart nothing of the link is remembered; for
  a durable subscription the tags are looked up as message ids near the head of its queue;
- a sender re-attaching with its unsettled map: the broker's attach carries, of those tags,
  the ones it accepted and the client had not settled (state `accepted`); a transfer re-sent
  with one of them is settled `accepted` and not enqueued again.
"""
from __future__ import annotations

import struct
import weakref
from collections import OrderedDict
from typing import Callable

from cproton_ffi import ffi, lib

from .amqptypes import Described, DecodeError, ULong, decode, encode, skip

ATTACH, TRANSFER = 0x12, 0x14
RESUME_FIELD = 8  # transfer: handle, delivery-id, delivery-tag, format, settled, more, rcv-settle-mode, state, resume
ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x24, 0x25, 0x26, 0x27
TERMINAL = (ACCEPTED, REJECTED, RELEASED, MODIFIED)
UNSETTLED_FIELD = 7  # attach: name, handle, role, snd-settle-mode, rcv-settle-mode, source, target, unsettled
MAX_ATTACH_FRAME = 1 << 20  # attach frames larger than this are not inspected
MAX_REMOTE_MAPS = 64  # unsettled maps read and not yet claimed by an attach, a connection
MAX_LINKS = 1024
MAX_TAGS = 1024


def delivery_tag(d) -> bytes:
    tag = lib.pn_delivery_tag(d)
    return ffi.unpack(tag.start, tag.size) if tag.size else b""


def state_code(state) -> int | None:
    """The descriptor code of a delivery state in an unsettled map (None: no state)."""
    if isinstance(state, Described):
        try:
            return int(state.descriptor)
        except (TypeError, ValueError):
            return None
    return None


class _Frames:
    """Frame boundaries of one direction of a connection's byte stream."""

    __slots__ = ("skip", "size", "head", "holding", "lost")

    def __init__(self) -> None:
        self.lost = False  # a frame size that cannot be: Proton ends the connection; we stop looking
        self.skip = 0  # bytes of the current (uninteresting) frame still to pass
        self.size = 0  # the current frame's size, while `skip` is set
        self.head = b""  # the start of the current frame, read so far (an attach: all of it)
        self.holding = True  # the current frame's bytes are held until it is known (not yet passed on)

    def split(self, data, hold: bool = True, codes: tuple[int, ...] = (ATTACH,)):
        """Yield (piece, code): the stream in order, as pass-through pieces (code None) and,
        when `hold` was asked at the frame's start, whole frames of the performatives in
        `codes`. Without `hold` the bytes are passed on as they come (pieces are then exactly
        `data`, in order)."""
        n = len(data)
        pos = 0
        view = memoryview(data)
        if self.lost:
            if n:
                yield view, None
            return
        unpack = struct.unpack_from
        while True:
            if not self.skip and not self.head and pos + 8 <= n:
                # At a frame boundary with the frame's start in `data`: frames of the other
                # performatives (nearly all: transfers, dispositions, flows) pass as one piece,
                # their starts read in place. The input tap cost ~4% of the broker's CPU in t4.
                start = pos
                while pos + 8 <= n and data[pos] != 0x41:  # 'A': a protocol header, below
                    size = unpack(">I", data, pos)[0]
                    body = data[pos + 4] * 4
                    if body < 8:
                        body = 8
                    need = size if size < body + 11 else body + 11
                    if size < 8 or pos + need > n:
                        break  # below: an impossible size, or a start that is not all here
                    at = pos + body
                    # The usual small-ulong descriptor read in place (no slice, no call), and
                    # no max/min calls: 0.51 -> 0.26 µs a 1 KiB transfer frame (timeit, 200 a read).
                    if size >= body + 3 and data[at] == 0x00 and data[at + 1] == 0x53:
                        if data[at + 2] in codes and size <= MAX_ATTACH_FRAME:
                            break
                    elif size <= MAX_ATTACH_FRAME and _code(data[pos:pos + need], body, size) in codes:
                        break
                    pos += size
                if pos > start:
                    if pos > n:
                        self.skip, self.size, pos = pos - n, size, n
                    yield view[start:pos], None
                    continue
            if self.skip and pos < n:
                take = min(self.skip, n - pos)
                yield view[pos:pos + take], None
                pos += take
                self.skip -= take
                continue
            head = self.head
            if not head:
                self.holding = hold
            need = 8
            if len(head) >= 8:
                if head[:4] == b"AMQP":  # a protocol header
                    self.head = b""
                    if self.holding:
                        yield head, None
                    continue
                size = struct.unpack_from(">I", head)[0]
                body = max(head[4] * 4, 8)
                if size < 8:
                    self.lost = True
                    if self.holding:
                        yield head, None
                    if pos < n:
                        yield view[pos:], None
                    return
                need = min(size, body + 11)
                if len(head) >= need:
                    code = _code(head, body, size) if size <= MAX_ATTACH_FRAME else None
                    if code not in codes:
                        self.head = b""
                        self.skip, self.size = size - len(head), size
                        if self.holding:
                            yield head, None
                        continue
                    need = size
                    if len(head) >= size:
                        self.head = b""
                        if self.holding:
                            yield head, code
                        continue
            if pos >= n:
                break  # the rest of this frame comes with the next data
            take = min(need - len(head), n - pos)
            piece = view[pos:pos + take]
            self.head = head + bytes(piece)
            pos += take
            if not self.holding:
                yield piece, None


    def unfinished(self) -> int:
        """Bytes of the current frame seen so far, all of it not yet (0: at a frame boundary)."""
        if self.lost:
            return 0
        return self.size - self.skip if self.skip else len(self.head)


def _code(head: bytes, body: int, size: int) -> int | None:
    """The performative code of a frame whose first bytes are `head` (None: not one)."""
    if size < body + 3 or head[body] != 0x00:
        return None
    if head[body + 1] == 0x53:
        return head[body + 2]
    if head[body + 1] == 0x80 and size >= body + 10 and len(head) >= body + 10 \
            and head[body + 2:body + 9] == b"\0" * 7:
        return head[body + 9]
    return None


def _fields(frame: bytes) -> tuple[int, list[tuple[int, int]]] | None:
    """(where the attach's list starts, [(start, end) of each field]) of an attach frame."""
    body = max(frame[4] * 4, 8)
    p = skip(frame, body + 1)  # past 0x00 and the descriptor
    code = frame[p]
    if code == 0xC0:
        count, q = frame[p + 2], p + 3
    elif code == 0xD0:
        count, q = struct.unpack_from(">I", frame, p + 5)[0], p + 9
    elif code == 0x45:
        count, q = 0, p + 1
    else:
        return None
    spans = []
    for _ in range(count):
        end = skip(frame, q)
        spans.append((q, end))
        q = end
    return p, spans


class FrameTap:
    """Per connection: the unsettled maps of the peer's attaches, and the broker's own maps to
    put into the attaches it sends."""

    __slots__ = ("_in", "_out", "remote_unsettled", "answers", "max_frame", "resuming", "_resuming_handles")

    def __init__(self) -> None:
        self.max_frame = 0  # the peer's max-frame-size (0: no limit): our attach must fit in it
        self._in = _Frames()
        self._out = _Frames()
        # (peer is the receiver, link name) -> the unsettled map its attach carried
        self.remote_unsettled: OrderedDict[tuple[bool, str], dict] = OrderedDict()
        self.answers: dict[str, dict] = {}  # link name -> our unsettled map for our attach
        # link name -> tags of deliveries we send again on a recovered link (resume flag set),
        # then by (channel, our handle) once our attach for the link has gone out
        self.resuming: dict[str, set] = {}
        self._resuming_handles: dict[tuple[int, int], tuple[str, set]] = {}

    def incoming(self, data: bytes) -> None:
        for piece, code in self._in.split(data):
            if code == ATTACH:
                self._read_attach(bytes(piece))

    def _read_attach(self, frame: bytes) -> None:
        try:
            found = _fields(frame)
            if found is None:
                return
            _, spans = found
            if len(spans) <= UNSETTLED_FIELD:
                return
            name, _ = decode(frame, spans[0][0])
            role, _ = decode(frame, spans[2][0])
            unsettled, _ = decode(frame, spans[UNSETTLED_FIELD][0])
        except (DecodeError, IndexError, struct.error):
            return  # Proton judges the frame; an unreadable map is no recovery
        if not isinstance(unsettled, dict) or not isinstance(name, str):
            return
        self.remote_unsettled[(bool(role), name)] = unsettled
        while len(self.remote_unsettled) > MAX_REMOTE_MAPS:
            self.remote_unsettled.popitem(last=False)

    def unfinished_in(self) -> int:
        """Bytes of the frame the peer has begun and not finished (Proton holds them)."""
        return self._in.unfinished()

    def claim(self, peer_receives: bool, name: str) -> dict | None:
        """The unsettled map the peer's attach of this link carried (None: it sent none)."""
        return self.remote_unsettled.pop((peer_receives, name), None)

    def output_passes(self) -> bool:
        """Whether a flush may hand its output on without `outgoing`: nothing to put into it,
        and the stream at a frame boundary. A flush takes everything the transport has, which
        ends on a frame boundary, so the stream still is at one after it. Following every
        frame cost 13% of the broker's CPU in the t4 benchmark (benchmarks/README.md)."""
        out = self._out
        return not (self.answers or self.resuming or self._resuming_handles or out.head or out.skip)

    def outgoing(self, data: bytes) -> bytes:
        """The output with the broker's unsettled maps put into its attach frames, and the
        resume flag on transfers sent again on a recovered link. With nothing to change
        (nearly always) the bytes pass as they are; the frame boundaries are followed all the
        same."""
        hold = bool(self.answers or self.resuming or self._resuming_handles)
        if not hold and not (self._out.head and self._out.holding):
            for _ in self._out.split(data, hold=False):
                pass
            return data
        codes = (ATTACH, TRANSFER) if self._resuming_handles or self.resuming else (ATTACH,)
        pieces = []
        for piece, code in self._out.split(data, hold=hold, codes=codes):
            if code == ATTACH:
                piece = self._answer(bytes(piece))
            elif code == TRANSFER:
                piece = self._resume(bytes(piece))
            pieces.append(piece)
        return b"".join(pieces)

    def forget(self, name: str) -> None:
        """The link is gone: nothing more to resume on it."""
        self.resuming.pop(name, None)
        for key in [k for k, (n, _) in self._resuming_handles.items() if n == name]:
            del self._resuming_handles[key]

    def _resume(self, frame: bytes) -> bytes:
        try:
            channel = struct.unpack_from(">H", frame, 6)[0]
            start, spans = _fields(frame) or (0, [])
            if len(spans) < 3:
                return frame
            handle, _ = decode(frame, spans[0][0])
            entry = self._resuming_handles.get((channel, int(handle)))
            if entry is None:
                return frame
            tag, _ = decode(frame, spans[2][0])
        except (DecodeError, IndexError, struct.error, TypeError, ValueError):
            return frame
        name, tags = entry
        # Looked for among the link's next transfers only (the messages may have gone to other
        # consumers meanwhile): after that the link's transfers pass unread again.
        tags.budget -= 1
        if tags.budget <= 0:
            del self._resuming_handles[(channel, int(handle))]
        if tag not in tags:
            return frame
        tags.discard(tag)
        if not tags:
            self._resuming_handles.pop((channel, int(handle)), None)
        fields = [frame[a:b] for a, b in spans]
        while len(fields) <= RESUME_FIELD:
            fields.append(b"\x40")
        fields[RESUME_FIELD] = b"\x41"
        return _rebuilt(frame, start, spans, fields)

    def _answer(self, frame: bytes) -> bytes:
        try:
            found = _fields(frame)
            if found is None:
                return frame
            start, spans = found
            name, _ = decode(frame, spans[0][0])
        except (DecodeError, IndexError, struct.error):
            return frame
        if not isinstance(name, str):
            return frame
        tags = self.resuming.pop(name, None)
        if tags:
            try:
                channel = struct.unpack_from(">H", frame, 6)[0]
                handle, _ = decode(frame, spans[1][0])
                self._resuming_handles[(channel, int(handle))] = (name, tags)
            except (DecodeError, IndexError, struct.error, TypeError, ValueError):
                pass
        answer = self.answers.pop(name, None)
        if answer is None:
            return frame
        fields = [frame[a:b] for a, b in spans]
        while len(fields) <= UNSETTLED_FIELD + 1:
            fields.append(b"\x40")
        entries = list(answer.items())
        while True:
            # A map that does not fit the peer's frames is cut, and said to be incomplete.
            fields[UNSETTLED_FIELD] = encode(dict(entries))
            fields[UNSETTLED_FIELD + 1] = b"\x41" if len(entries) < len(answer) else b"\x40"
            out = _rebuilt(frame, start, spans, fields)
            if not self.max_frame or len(out) <= self.max_frame or not entries:
                return out
            entries = entries[:len(entries) // 2]


class ResumeTags(set):
    """Tags of deliveries to send again with the resume flag, looked for among the next
    `budget` transfers of their link."""

    __slots__ = ("budget",)

    def __init__(self, tags) -> None:
        super().__init__(tags)
        self.budget = len(self) + MAX_TAGS


def _rebuilt(frame: bytes, start: int, spans: list[tuple[int, int]], fields: list[bytes]) -> bytes:
    """`frame` with its performative's list (at `start`, fields at `spans`) made of `fields`;
    the frame header, extended header, descriptor and payload kept."""
    body = b"".join(fields)
    listed = (bytes((0xC0, len(body) + 1, len(fields))) if len(body) + 1 < 256 and len(fields) < 256
              else b"\xd0" + struct.pack(">II", len(body) + 4, len(fields)))
    end = spans[-1][1] if spans else start + (3 if frame[start] == 0xC0 else 9 if frame[start] == 0xD0 else 1)
    out = frame[8:start] + listed + body + frame[end:]
    return struct.pack(">I", 8 + len(out)) + frame[4:8] + out


def accepted_state() -> Described:
    return Described(ULong(ACCEPTED), [])


class LinkMemory:
    """What the broker keeps of detached durable links (see the module docstring), each with
    the user whose link it was: only that user's attach may resume it (the decision is the
    caller's, `Authorization.may_take_over`); another user's attach under the same container
    id and link name finds nothing, and leaves it for its owner."""

    def __init__(self) -> None:
        # (container id, link name) -> (owner, last tag, {tag: ref})
        self.consumers: OrderedDict[tuple[str, str], tuple[str | None, int, dict]] = OrderedDict()
        # (container id, link name) -> (owner, tags accepted that the client had not settled)
        self.producers: OrderedDict[tuple[str, str], tuple[str | None, tuple]] = OrderedDict()

    @staticmethod
    def _keep(table: OrderedDict, key, value) -> None:
        table.pop(key, None)
        table[key] = value
        while len(table) > MAX_LINKS:
            table.popitem(last=False)

    @staticmethod
    def _claim(table: OrderedDict, key, may_take_over: Callable[[str | None], bool]):
        entry = table.get(key)
        if entry is None or not may_take_over(entry[0]):
            return None  # nothing, or another user's: it stays for its owner
        del table[key]
        return entry

    def consumer_detached(self, key: tuple[str, str], owner: str | None, last_tag: int, unsettled: dict) -> None:
        self._keep(self.consumers, key, (owner, last_tag, dict(list(unsettled.items())[-MAX_TAGS:])))

    def consumer_resumed(self, key: tuple[str, str],
                         may_take_over: Callable[[str | None], bool]) -> tuple[int, dict] | None:
        """The consumer link's state, taken, when `may_take_over(owner)` allows."""
        entry = self._claim(self.consumers, key, may_take_over)
        return None if entry is None else (entry[1], entry[2])

    def producer_detached(self, key: tuple[str, str], owner: str | None, tags) -> None:
        """A durable sender link lost: `tags`, the transfers it accepted that the client had
        not settled, are what a recovering sender is told the broker has."""
        self._keep(self.producers, key, (owner, tuple(tags)[-MAX_TAGS:]))

    def producer_resumed(self, key: tuple[str, str], may_take_over: Callable[[str | None], bool]) -> set:
        """The sender link's unsettled accepted tags, taken, when `may_take_over(owner)` allows
        (an empty set otherwise)."""
        entry = self._claim(self.producers, key, may_take_over)
        return set() if entry is None else set(entry[1])


_memories: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def memory_of(broker) -> LinkMemory:
    """The broker's LinkMemory (one a broker)."""
    memory = _memories.get(broker)
    if memory is None:
        memory = _memories[broker] = LinkMemory()
    return memory
