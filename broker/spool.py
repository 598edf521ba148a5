"""The paging spool: where the page policy puts the messages of queues that store nothing.

A durable queue on a durable store pages into the store. A non-durable queue (or any queue when
the store is `memory`) has nowhere durable to go, and must not: its messages are gone when the
broker stops. Like Artemis, which pages such messages to page files even with persistence off,
Hermod writes them to files of a private temporary directory, one short sequence of segment
files per queue, read back first in first out as consumers drain the queue. A segment is
deleted once read to its end; the directory goes when the broker stops.

Record layout (little-endian): message id (u64), delivery count (u32), routing type (u8: 0
none, 1 anycast, 2 multicast), arrival (i64 epoch ms), address length (u16), encoded length
(u32), then the address (UTF-8) and the encoded message as it will be sent.
"""
from __future__ import annotations

import itertools
import shutil
import struct
import tempfile
from collections import deque
from pathlib import Path

from .core.message import ANYCAST, MULTICAST
from .core.ports import MessageRecord, StoredReference

SEGMENT_BYTES = 64 * 1024 * 1024
_HEAD = struct.Struct("<QIBqHI")
_ROUTING_CODES = {None: 0, ANYCAST: 1, MULTICAST: 2}
_ROUTING_TYPES = {code: rt for rt, code in _ROUTING_CODES.items()}


class _QueueSpool:
    """One queue's segments: appended to at the newest, read from the oldest."""

    __slots__ = ("prefix", "segments", "writer", "written", "reader", "_numbers")

    def __init__(self, prefix: Path):
        self.prefix = prefix
        self.segments: deque[Path] = deque()
        self.writer = None  # the newest segment, open for appending
        self.written = 0  # bytes in the newest segment
        self.reader = None  # the oldest segment, open for reading
        self._numbers = itertools.count()

    def append(self, record: bytes, segment_bytes: int) -> None:
        if self.writer is None or self.written >= segment_bytes:
            if self.writer is not None:
                self.writer.close()
            path = self.prefix.with_name(f"{self.prefix.name}-{next(self._numbers)}.seg")
            self.segments.append(path)
            self.writer = open(path, "ab")
            self.written = 0
        self.writer.write(record)
        self.written += len(record)

    def read(self, limit: int) -> list[StoredReference]:
        if self.writer is not None:
            self.writer.flush()  # whole records only: a read never sees half of one
        out: list[StoredReference] = []
        while len(out) < limit and self.segments:
            if self.reader is None:
                self.reader = open(self.segments[0], "rb")
            head = self.reader.read(_HEAD.size)
            if len(head) < _HEAD.size:
                self._retire_oldest()
                continue
            message_id, count, routing, arrival, address_len, encoded_len = _HEAD.unpack(head)
            address = self.reader.read(address_len).decode()
            encoded = self.reader.read(encoded_len)
            out.append(StoredReference(
                MessageRecord(message_id, address, encoded, _ROUTING_TYPES.get(routing), arrival=arrival),
                count))
        return out

    def _retire_oldest(self) -> None:
        """The oldest segment is read to its end: delete it (the newest too: appends restart)."""
        self.reader.close()
        self.reader = None
        path = self.segments.popleft()
        if not self.segments and self.writer is not None:
            self.writer.close()
            self.writer = None
        path.unlink(missing_ok=True)

    def close(self) -> None:
        for f in (self.reader, self.writer):
            if f is not None:
                f.close()
        self.reader = self.writer = None
        for path in self.segments:
            path.unlink(missing_ok=True)
        self.segments.clear()


class FileSpool:
    """`ports.Spool` on files in a private temporary directory (under `parent` if given)."""

    def __init__(self, parent: str | Path | None = None, segment_bytes: int = SEGMENT_BYTES):
        self.parent = parent
        self.directory: Path | None = None  # made when something is first paged
        self.segment_bytes = segment_bytes
        self._queues: dict[str, _QueueSpool] = {}
        self._numbers = itertools.count()

    def append(self, queue: str, ref: StoredReference) -> None:
        spool = self._queues.get(queue)
        if spool is None:
            if self.directory is None:
                self.directory = Path(tempfile.mkdtemp(prefix="hermod-paging-", dir=self.parent))
            # Files are numbered, not named after the queue: a queue name may be any string.
            spool = self._queues[queue] = _QueueSpool(self.directory / f"q{next(self._numbers)}")
        m = ref.message
        address = m.address.encode()
        spool.append(
            _HEAD.pack(m.id, ref.delivery_count, _ROUTING_CODES.get(m.routing_type, 0), m.arrival,
                       len(address), len(m.encoded)) + address + m.encoded,
            self.segment_bytes)

    def read(self, queue: str, limit: int) -> list[StoredReference]:
        spool = self._queues.get(queue)
        if spool is None:
            return []
        out = spool.read(limit)
        if not spool.segments:
            del self._queues[queue]
        return out

    def drop(self, queue: str) -> None:
        spool = self._queues.pop(queue, None)
        if spool is not None:
            spool.close()

    def close(self) -> None:
        for spool in self._queues.values():
            spool.close()
        self._queues.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


__all__ = ["FileSpool", "SEGMENT_BYTES"]
