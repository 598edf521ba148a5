"""A parsed STOMP frame, the commands, and the caller's limits."""

from __future__ import annotations

from dataclasses import dataclass

CONNECT_COMMANDS = frozenset({"CONNECT", "STOMP"})
CLIENT_COMMANDS = frozenset({"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
                             "BEGIN", "COMMIT", "ABORT", "DISCONNECT"})
SERVER_COMMANDS = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
ALL_COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS
# Frames whose headers are never escaped, whatever the version (1.0 clients must read CONNECTED).
UNESCAPED_COMMANDS = frozenset({"CONNECT", "STOMP", "CONNECTED"})

VERSIONS = ("1.0", "1.1", "1.2")


class Frame:
    """One frame. `headers` keeps every header line in order, repeats included; `header()` and
    `first` give the first occurrence, which is the one that counts (specification, "Repeated
    Header Entries")."""

    __slots__ = ("command", "headers", "body", "first")

    def __init__(self, command: str, headers: tuple[tuple[str, str], ...] = (), body: bytes = b"",
                 first: dict[str, str] | None = None) -> None:
        self.command = command
        self.headers = headers
        self.body = body
        if first is None:
            first = {}
            for name, value in headers:
                first.setdefault(name, value)
        self.first = first

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.first.get(name, default)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return (self.command, self.headers, self.body) == (other.command, other.headers, other.body)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 64 else self.body[:64] + b"..."
        return f"Frame({self.command!r}, {self.headers!r}, {body!r})"


class Heartbeat:
    """An EOL (or a run of them) between frames: the client's heart-beat, activity to count."""

    _instance: Heartbeat | None = None

    def __new__(cls) -> Heartbeat:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HEARTBEAT"


HEARTBEAT = Heartbeat()


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds checked as bytes arrive. `max_frame_size` is the contract's `max_message_size` and
    covers the whole frame (command, headers, body and the NUL); the others bound one line and the
    number of header lines, so a frame without a terminator is refused early."""

    max_frame_size: int = 104857600
    max_header_line: int = 65536
    max_headers: int = 1000
    max_command_line: int = 64
