"""MESSAGE frames, built once per message and reused for every subscriber it reaches (a topic's
four subscribers, a redelivery): the frame without its `subscription` and `ack` headers is kept
for the last messages (by the identity of their encoded bytes, which the entry keeps, so the
identity cannot be reused), and each delivery adds those two lines. A connection with temporary
destinations of its own names reply-to addresses its own way, so its frames are kept apart."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...mapping.stomp import to_message
from ...stomp import encode_frame, escape

if TYPE_CHECKING:
    from ...core.message import Message
    from .connection import StompConnection

KEPT = 256
# key -> (encoded bytes, frame up to its last header line, the rest from the blank line, message-id)
_FRAMES: dict[tuple, tuple[bytes, bytes, bytes, str]] = {}


def _parts(conn: StompConnection, message: Message, encoded: bytes, name: str, redelivered: bool,
           reply_name: Callable[[str, int], str]) -> tuple[bytes, bytes, str]:
    version = conn.version
    key = (id(encoded), name, redelivered, version, id(conn.temporaries) if conn.temporaries.names else 0)
    hit = _FRAMES.get(key)
    if hit is not None and hit[0] is encoded:
        return hit[1], hit[2], hit[3]
    headers, body = to_message(encoded, name, reply_name, f"hermod:{message.id}", redelivered)
    whole = encode_frame("MESSAGE", headers, body, version)
    cut = whole.index(b"\n\n") + 1  # escaped headers hold no blank line
    entry = (encoded, whole[:cut], whole[cut:], headers[0][1])
    if len(_FRAMES) >= KEPT:
        del _FRAMES[next(iter(_FRAMES))]
    _FRAMES[key] = entry
    return entry[1], entry[2], entry[3]


def message_frame(conn: StompConnection, message: Message, name: str, redelivered: bool, subscription: str,
                  reply_name: Callable[[str, int], str], ack_key: Callable[[str], str] | None) -> tuple[bytes, str | None]:
    """(the MESSAGE frame's bytes, the key the client acknowledges it by, when `ack_key` is given:
    it is called with the message-id and, in 1.2, its result goes in the `ack` header)."""
    head, rest, message_id = _parts(conn, message, message.encoded, name, redelivered, reply_name)
    version = conn.version
    lines = [head, b"subscription:", escape(subscription, version).encode(), b"\n"]
    key = None
    if ack_key is not None:
        key = ack_key(message_id)
        if version == "1.2":
            lines += [b"ack:", escape(key, version).encode(), b"\n"]
    lines.append(rest)
    return b"".join(lines), key
