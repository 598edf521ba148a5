"""The codec's one error type. Everything malformed, over a limit or not negotiable surfaces as a
`StompError` whose message is fit for the `message` header of the ERROR frame the adapter sends
before it closes the connection, so a hostile peer never causes an IndexError or MemoryError."""

from __future__ import annotations


class StompError(Exception):
    """Bytes that are not a valid STOMP frame, or a header value the broker cannot accept.

    From `FrameParser.feed`, `frames` holds what the same feed completed before the bad bytes
    (frames and heart-beats, in order): valid frames a client pipelined ahead of its mistake are
    the adapter's to process before it sends the ERROR frame."""

    frames: list = []  # set per instance by the parser; this class value is never mutated


class UnsupportedVersion(StompError):
    """No version of the client's `accept-version` is one the broker speaks. `supported` goes in
    the ERROR frame's `version` header, as the specification asks."""

    def __init__(self, offered: str, supported: tuple[str, ...]) -> None:
        super().__init__(f"Supported protocol versions are {' '.join(supported)} (the client offered {offered!r})")
        self.supported = supported
