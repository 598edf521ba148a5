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

import errno
import itertools
import logging
import os
import shutil
import struct
import tempfile
from collections import deque
from pathlib import Path

from .core.message import ANYCAST, MULTICAST
from .core.ports import MessageRecord, StoredReference

log = logging.getLogger(__name__)

SEGMENT_BYTES = 64 * 1024 * 1024
_HEAD = struct.Struct("<QIBqHI")
_ROUTING_CODES = {None: 0, ANYCAST: 1, MULTICAST: 2}
_ROUTING_TYPES = {code: rt for rt, code in _ROUTING_CODES.items()}


class SpoolError(OSError):
    """The spool could not keep or give back messages (disk full, a file gone). A failed
    append wrote nothing; a failed read took nothing (try again later)."""


class _QueueSpool:
    """One queue's segments: appended to at the newest, read from the oldest.

    Appends go straight to the file (no buffer), so that an error shows at the append, for
    the send that caused it, and a failed append is cut off again: the file only ever holds
    whole records. A read that fails leaves its position at the start of the record it was
    reading. A segment whose file has gone (a temp cleaner) is skipped with the number of
    messages it held, so the queue's count stays right and the rest is still read."""

    __slots__ = ("prefix", "segments", "writer", "written", "reader", "_numbers", "counts",
                 "lost")

    def __init__(self, prefix: Path):
        self.prefix = prefix
        self.segments: deque[Path] = deque()
        self.counts: deque[int] = deque()  # records in each segment not read yet
        self.writer: int | None = None  # descriptor of the newest segment, open for appending
        self.written = 0  # bytes in the newest segment
        self.reader = None  # the oldest segment, open for reading
        self._numbers = itertools.count()
        self.lost = 0  # messages of segments that disappeared, not reported yet

    def append(self, record: bytes, segment_bytes: int) -> None:
        if self.writer is None or self.written >= segment_bytes:
            path = self.prefix.with_name(f"{self.prefix.name}-{next(self._numbers)}.seg")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError as error:
                raise SpoolError(error.errno, f"cannot create paging file {path}: "
                                 f"{error.strerror}") from error
            if self.writer is not None:
                os.close(self.writer)
            self.segments.append(path)
            self.counts.append(0)
            self.writer = fd
            self.written = 0
        view = memoryview(record)
        done = 0
        try:
            while done < len(view):
                done += os.write(self.writer, view[done:])
        except OSError as error:
            try:
                os.ftruncate(self.writer, self.written)  # whole records only
            except OSError:
                pass
            raise SpoolError(error.errno, f"cannot write paging file {self.segments[-1]}: "
                             f"{error.strerror}") from error
        self.written += len(record)
        self.counts[-1] += 1

    def read(self, limit: int) -> list[StoredReference]:
        out: list[StoredReference] = []
        while len(out) < limit and self.segments:
            if self.reader is None:
                try:
                    self.reader = open(self.segments[0], "rb")
                except FileNotFoundError:
                    self.lost += self.counts[0]
                    self._retire_oldest()
                    continue
                except OSError as error:
                    if out:
                        return out
                    raise SpoolError(error.errno, f"cannot open paging file "
                                     f"{self.segments[0]}: {error.strerror}") from error
            at = self.reader.tell()
            try:
                record = self._read_record()
            except OSError as error:
                self.reader.seek(at)
                if out:
                    return out
                raise SpoolError(error.errno, f"cannot read paging file {self.segments[0]}: "
                                 f"{error.strerror}") from error
            if record is None:
                self._retire_oldest()
                continue
            self.counts[0] -= 1
            out.append(record)
        return out

    def _read_record(self) -> StoredReference | None:
        head = self.reader.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return None  # the end of the segment (appends are whole records)
        message_id, count, routing, arrival, address_len, encoded_len = _HEAD.unpack(head)
        address = self.reader.read(address_len)
        encoded = self.reader.read(encoded_len)
        if len(address) < address_len or len(encoded) < encoded_len:
            raise OSError(errno.EIO, "a record is cut short")
        return StoredReference(
            MessageRecord(message_id, address.decode(), encoded, _ROUTING_TYPES.get(routing),
                          arrival=arrival),
            count)

    def _retire_oldest(self) -> None:
        """The oldest segment is read to its end: delete it (the newest too: appends restart)."""
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        path = self.segments.popleft()
        self.counts.popleft()
        if not self.segments and self.writer is not None:
            os.close(self.writer)
            self.writer = None
        path.unlink(missing_ok=True)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        if self.writer is not None:
            os.close(self.writer)
        self.reader = self.writer = None
        for path in self.segments:
            path.unlink(missing_ok=True)
        self.segments.clear()
        self.counts.clear()


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
                try:
                    self.directory = Path(tempfile.mkdtemp(prefix="hermod-paging-", dir=self.parent))
                except OSError as error:
                    raise SpoolError(error.errno, f"cannot create a paging directory: "
                                     f"{error.strerror}") from error
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
        try:
            out = spool.read(limit)
        finally:
            if spool.lost:
                log.error("paging files of queue %s disappeared: %d messages lost", queue,
                          spool.lost)
                spool.lost = 0
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


__all__ = ["FileSpool", "SEGMENT_BYTES", "SpoolError"]
