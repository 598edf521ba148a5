"""Splitting a byte stream into commands.

With size prefixes (Classic's default, `SizePrefixDisabled = false`) every command is a 4-byte
big-endian length and that many bytes. The length is checked against the caller's maximum as soon
as its four bytes are in, before anything is buffered for it, and bytes are kept only up to the
end of the current command, so memory stays within one maximum command. Input is consumed in
O(size) per feed: complete commands are handed out as memoryview slices of the received chunk
when they lie within it, and a partial command is accumulated in one bytearray.
"""

from __future__ import annotations

import struct

from .errors import OpenWireError

_SIZE = struct.Struct(">i")


class FrameReader:
    """Feed bytes, get the body (type code onwards) of each complete size-prefixed command."""

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self._partial = bytearray()
        self._wanted = -1  # body length of the command being accumulated, -1 while unknown

    def buffered(self) -> int:
        """Bytes held for an incomplete command."""
        return len(self._partial)

    def expected(self) -> int:
        """Bytes the incomplete command will hold once complete (its size prefix's), or those
        held so far while its size is not known yet: what a caller counts against its memory."""
        return self._wanted if self._wanted >= 0 else len(self._partial)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """The bodies completed by `data`. A body that lies within `data` is a view of it (no
        copy): pass immutable bytes, or decode the views before reusing the buffer."""
        view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
        out: list[memoryview] = []
        pos, end = 0, len(view)
        partial = self._partial
        while pos < end:
            if partial or self._wanted >= 0:
                # Complete what is buffered: first the prefix, then the body.
                if self._wanted < 0:
                    take = min(4 - len(partial), end - pos)
                    partial += view[pos:pos + take]
                    pos += take
                    if len(partial) < 4:
                        break
                    self._wanted = self._check(_SIZE.unpack_from(partial)[0])
                    del partial[:]
                take = min(self._wanted - len(partial), end - pos)
                partial += view[pos:pos + take]
                pos += take
                if len(partial) < self._wanted:
                    break
                out.append(memoryview(bytes(partial)))
                del partial[:]
                self._wanted = -1
                continue
            if end - pos < 4:
                partial += view[pos:end]
                break
            size = self._check(_SIZE.unpack_from(view, pos)[0])
            pos += 4
            if end - pos >= size:
                out.append(view[pos:pos + size])
                pos += size
            else:
                self._wanted = size
                partial += view[pos:end]
                pos = end
        return out

    def _check(self, size: int) -> int:
        if size < 1:
            raise OpenWireError(f"command size {size} is not positive")
        if size > self.max_size:
            raise OpenWireError(f"command of {size} bytes is over the limit of {self.max_size}")
        return size


def frame(body: bytes) -> bytes:
    """A command body with its size prefix."""
    return _SIZE.pack(len(body)) + body
