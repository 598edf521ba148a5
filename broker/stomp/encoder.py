"""Frames the broker sends (CONNECTED, MESSAGE, RECEIPT, ERROR), escaped per the negotiated
version. MESSAGE and ERROR always carry `content-length` (a body may hold NUL bytes, and the
contract asks for it on every MESSAGE); the caller's own `content-length`, if any, is replaced.

Characters a version cannot carry in a header never break the framing: in 1.0 (and in the
never-escaped CONNECTED frame) CR and LF, in 1.1 CR, become U+FFFD, and so does a colon in a
1.0 header name. The header then arrives altered, the message still arrives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .frames import UNESCAPED_COMMANDS

_ESCAPE_12 = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\\r"})
_ESCAPE_11 = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\ufffd"})
_RAW_VALUE = str.maketrans({"\n": "\ufffd", "\r": "\ufffd"})
_RAW_NAME = str.maketrans({"\n": "\ufffd", "\r": "\ufffd", ":": "\ufffd"})
_WITH_LENGTH = frozenset({"MESSAGE", "ERROR"})

Headers = Iterable[tuple[str, str]] | Mapping[str, str]


def escape(text: str, version: str | None) -> str:
    """A header value (or name) as `version` writes it in an escaped frame."""
    if version == "1.2":
        return text.translate(_ESCAPE_12)
    if version == "1.1":
        return text.translate(_ESCAPE_11)
    return text.translate(_RAW_VALUE)


def encode_frame(command: str, headers: Headers = (), body: bytes | str = b"",
                 version: str | None = "1.2") -> bytes:
    """The frame's bytes. `version` is the negotiated one (None before negotiation: an ERROR for
    a CONNECT that could not be answered is written as 1.0 does). Header order is kept."""
    if isinstance(body, str):
        body = body.encode()
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    with_length = command in _WITH_LENGTH or bool(body)
    escaped = version in ("1.1", "1.2") and command not in UNESCAPED_COMMANDS
    lines = [command]
    for name, value in pairs:
        if with_length and name == "content-length":
            continue
        if escaped:
            lines.append(f"{escape(name, version)}:{escape(value, version)}")
        else:
            lines.append(f"{name.translate(_RAW_NAME)}:{value.translate(_RAW_VALUE)}")
    if with_length:
        lines.append(f"content-length:{len(body)}")
    head = ("\n".join(lines) + "\n\n").encode()
    return b"".join((head, body, b"\x00"))
