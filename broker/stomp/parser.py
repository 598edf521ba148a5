"""The incremental frame parser: feed it bytes as they arrive, get complete frames and heart-beats.

The work is O(bytes): header lines are cut with `bytearray.find`, a body with `content-length` is
taken as one slice, a body without it ends at the first NUL found by `find` resumed where the last
search stopped (so byte-at-a-time feeding does not rescan). Every limit is checked before more of
the frame is buffered than it allows: a line without an EOL, a frame without a NUL and a
`content-length` over the frame limit are refused as soon as they cross their bound.

Choices where the specification leaves room (STOMP 1.0 says little):
- EOL is LF or CR LF in every version (1.2 defines CR LF; 1.0 and 1.1 clients typed in a terminal
  send it too, and a 1.1 value cannot end in CR anyway: 1.1 has no escape for it). Between
  frames a stray CR is skipped with the EOLs; each LF there is one heart-beat.
- Headers are escaped in 1.1 and 1.2 only, never in CONNECT, STOMP and CONNECTED; before the
  version is negotiated (`version=None`) nothing is unescaped, which is right for CONNECT.
- Header names and values must be UTF-8; values are not trimmed (whitespace is part of them).
- A header line without a colon, or with an empty name, is an error.
"""

from __future__ import annotations

import re

from .errors import StompError
from .frames import CLIENT_COMMANDS, CONNECT_COMMANDS, HEARTBEAT, UNESCAPED_COMMANDS, Frame, Heartbeat, Limits

# A run of EOLs between frames. A character class, not `(?:\r?\n)+`: a repeated group costs the
# regex engine memory per repetition, and a heart-beat flood must not. A stray CR in the run is
# tolerated; each LF counts as one heart-beat.
_EOLS = re.compile(rb"[\r\n]+")
_ESCAPE = re.compile(r"\\(.?)", re.S)
_UNESCAPE_11 = {"n": "\n", "c": ":", "\\": "\\"}
_UNESCAPE_12 = {**_UNESCAPE_11, "r": "\r"}
_DIGITS = re.compile(rb"[0-9]+")

_IDLE, _HEAD, _BODY = 0, 1, 2
CHUNK = 65536  # at most this many bytes are appended to the buffer per parsing step


def _unescape(text: str, table: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        replacement = table.get(m.group(1))
        if replacement is None:
            raise StompError(f"undefined escape sequence \\{m.group(1)} in header {_shown(text)}")
        return replacement

    return _ESCAPE.sub(one, text)


def _shown(raw: str | bytes | bytearray, limit: int = 40) -> str:
    """A short printable excerpt of hostile input for an error message."""
    text = repr(bytes(raw[:limit]) if not isinstance(raw, str) else raw[:limit])
    return text + ("..." if len(raw) > limit else "")


class FrameParser:
    """One connection's inbound side. `version` is None until the adapter has negotiated it (the
    CONNECT frame is parsed without it), then "1.0", "1.1" or "1.2". While it is None, parsing
    stops after a CONNECT (or STOMP) frame, because frames a client pipelines behind it are
    escaped per the version still to be negotiated: set `version`, then `feed(b"")` parses what
    was held. After a `StompError` the stream is out of step: the connection must be closed, the
    parser not fed again."""

    def __init__(self, limits: Limits | None = None, version: str | None = None,
                 commands: frozenset[str] = CLIENT_COMMANDS) -> None:
        self.limits = limits or Limits()
        self._version = version
        self._held = False  # a CONNECT was parsed before the version was known
        self.commands = commands
        self.heartbeats = 0
        self._buf = bytearray()
        self._pos = 0
        self._phase = _IDLE
        self._start = 0  # offset of the current frame in _buf (negative once its head is dropped)
        self._command = ""
        self._headers: list[tuple[str, str]] = []
        self._first: dict[str, str] = {}
        self._length: int | None = None
        self._body = 0
        self._scan = 0

    @property
    def version(self) -> str | None:
        return self._version

    @version.setter
    def version(self, version: str | None) -> None:
        self._version = version
        if version is not None:
            self._held = False

    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | Heartbeat]:
        """Parse `data`; return the frames it completes, in order, with `HEARTBEAT` where one or
        more EOLs came between frames (a run of them counts once in the list, each in
        `self.heartbeats`). Raises `StompError` on malformed input or a limit crossed; its
        `frames` are those this call completed before the bad bytes."""
        out: list[Frame | Heartbeat] = []
        view = memoryview(data)
        try:
            if not view:
                self._parse(out)
                self._compact()
            offset, size, limit = 0, len(view), self.limits.max_frame_size
            while offset < size:
                # Never more than the current frame may still grow by (+1, to see it cross the limit).
                held = len(self._buf) - (self._start if self._phase != _IDLE else 0)
                take = max(1, min(CHUNK, limit + 1 - held))
                self._buf += view[offset:offset + take]
                offset += take
                self._parse(out)
                self._compact()
        except StompError as e:
            e.frames = out
            raise
        return out

    def _compact(self) -> None:
        pos = self._pos
        if pos:
            del self._buf[:pos]
            self._pos = 0
            self._start -= pos
            self._body -= pos
            self._scan -= pos

    def _parse(self, out: list[Frame | Heartbeat]) -> None:
        buf = self._buf
        limits = self.limits
        while True:
            if self._held:
                if len(buf) - self._pos > limits.max_frame_size:
                    raise StompError("more than a frame's worth of bytes sent before CONNECTED")
                return
            if self._phase == _IDLE:
                m = _EOLS.match(buf, self._pos)
                if m is not None:
                    beats = buf.count(b"\n", self._pos, m.end())
                    if beats:
                        self.heartbeats += beats
                        if not out or out[-1] is not HEARTBEAT:
                            out.append(HEARTBEAT)
                    self._pos = m.end()
                if self._pos == len(buf):
                    return
                self._phase = _HEAD
                self._start = self._pos
                self._command = ""
                self._headers = []
                self._first = {}
            if self._phase == _HEAD and not self._command and self._whole_head(buf):
                pass  # the common case, a complete LF-only head: parsed in one go, now in _BODY
            elif self._phase == _HEAD:
                pos = self._pos
                bound = limits.max_header_line if self._command else limits.max_command_line
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if len(buf) - pos > bound + 1:  # +1: a CR may precede the LF still to come
                        self._line_too_long(buf, pos, bound)
                    self._check_size(len(buf))
                    return
                end = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
                if end - pos > bound:
                    self._line_too_long(buf, pos, bound)
                self._pos = nl + 1
                self._check_size(self._pos)
                if not self._command:
                    self._command = self._parse_command(buf[pos:end])
                elif end > pos:
                    if len(self._headers) >= limits.max_headers:
                        raise StompError(f"more than {limits.max_headers} headers in a {self._command} frame")
                    self._parse_header(buf[pos:end])
                else:
                    self._start_body()
            if self._phase == _BODY:
                if self._length is not None:
                    end = self._body + self._length
                    if len(buf) <= end:
                        return
                    if buf[end] != 0:
                        raise StompError(f"the body of a {self._command} frame is longer than its "
                                         f"content-length ({self._length}): no NUL after it")
                else:
                    end = buf.find(b"\x00", self._scan)
                    if end < 0:
                        self._scan = len(buf)
                        self._check_size(len(buf))
                        return
                self._check_size(end + 1)
                with memoryview(buf) as view:
                    body = bytes(view[self._body:end])
                out.append(Frame(self._command, tuple(self._headers), body, self._first))
                self._pos = end + 1
                self._phase = _IDLE
                if self._version is None and self._command in CONNECT_COMMANDS:
                    self._held = True

    def _whole_head(self, buf: bytearray) -> bool:
        """Parse a complete head (command and headers) at once when it is all buffered, uses LF
        only and is within every limit: one find, one split, one decode instead of a step per
        line. Anything unusual (CR, a limit, bad UTF-8, a line without a colon) returns False
        and the line-by-line path, which gives the precise error, takes over."""
        pos = self._pos
        end = buf.find(b"\n\n", pos)
        if end < 0:
            return False
        limits = self.limits
        if end + 2 - self._start > limits.max_frame_size:
            return False
        block = buf[pos:end]
        if b"\r" in block:
            return False
        lines = block.split(b"\n")
        if len(lines) - 1 > limits.max_headers or len(lines[0]) > limits.max_command_line:
            return False
        if len(block) > limits.max_header_line and max(map(len, lines)) > limits.max_header_line:
            return False
        try:
            command, *rest = block.decode().split("\n")
        except UnicodeDecodeError:
            return False
        if command not in self.commands:
            return False
        table = None
        if self._version in ("1.1", "1.2") and command not in UNESCAPED_COMMANDS:
            table = _UNESCAPE_12 if self._version == "1.2" else _UNESCAPE_11
        headers = []
        first: dict[str, str] = {}
        for line in rest:
            name, colon, value = line.partition(":")
            if not colon or not name:
                return False
            if table is not None and "\\" in line:
                name, value = _unescape(name, table), _unescape(value, table)
            headers.append((name, value))
            first.setdefault(name, value)
        self._command, self._headers, self._first = command, headers, first
        self._pos = end + 2
        self._start_body()
        return True

    def _line_too_long(self, buf: bytearray, pos: int, bound: int) -> None:
        what = "header line" if self._command else "command line"
        raise StompError(f"{what} longer than {bound} bytes (starts {_shown(buf[pos:pos + min(40, bound + 2)])})")

    def _check_size(self, end: int) -> None:
        if end - self._start > self.limits.max_frame_size:
            raise StompError(f"frame larger than the limit of {self.limits.max_frame_size} bytes "
                             f"({self._command or 'no command yet'})")

    def _parse_command(self, raw: bytearray) -> str:
        try:
            command = raw.decode("ascii")
        except UnicodeDecodeError:
            command = ""
        if command not in self.commands:
            raise StompError(f"unknown command {_shown(raw)}")
        return command

    def _parse_header(self, raw: bytearray) -> None:
        colon = raw.find(b":")
        if colon < 0:
            raise StompError(f"header line without a colon: {_shown(raw)}")
        if colon == 0:
            raise StompError(f"header line without a name: {_shown(raw)}")
        try:
            name = raw[:colon].decode()
            value = raw[colon + 1:].decode()
        except UnicodeDecodeError:
            raise StompError(f"header is not UTF-8: {_shown(raw)}") from None
        version = self.version
        if version in ("1.1", "1.2") and self._command not in UNESCAPED_COMMANDS:
            table = _UNESCAPE_12 if version == "1.2" else _UNESCAPE_11
            if "\\" in name:
                name = _unescape(name, table)
            if "\\" in value:
                value = _unescape(value, table)
        self._headers.append((name, value))
        self._first.setdefault(name, value)

    def _start_body(self) -> None:
        self._phase = _BODY
        self._body = self._scan = self._pos
        length = self._first.get("content-length")
        if length is None:
            self._length = None
            return
        raw = length.encode()
        if not _DIGITS.fullmatch(raw) or len(raw) > 19:
            raise StompError(f"content-length is not a byte count: {_shown(length)}")
        self._length = int(raw)
        # The whole frame (head, body, NUL) must fit: refuse before buffering any of the body.
        self._check_size(self._pos + self._length + 1)

