"""When the countdown of a kept terminus starts (AMQP 1.0 §3.5.3 expiry policy): at the
link's detach, at the end of its session, at the close of its connection, or never. The
countdown itself, and what a re-attach does to it, is the core's (core.lingering); this keeps,
per connection, the detached links' nodes that wait for their session or connection to end."""
from __future__ import annotations

from typing import Callable

LINK_DETACH, SESSION_END, CONNECTION_CLOSE, NEVER = "link-detach", "session-end", "connection-close", "never"


class ExpiryWaits:
    """Per connection: countdowns to start when a session ends or the connection closes.
    At most one entry per detached link whose node was kept, dropped when it starts."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: list[tuple[object, str, Callable[[], None]]] = []  # (session, policy, start)

    def detached(self, policy: str, session, session_ended: bool, start: Callable[[], None]) -> None:
        """A link whose node is kept detached: start its countdown now or register it."""
        if policy == LINK_DETACH or (policy == SESSION_END and session_ended):
            start()
        elif policy in (SESSION_END, CONNECTION_CLOSE):
            self._waiting.append((session, policy, start))
        # never: kept until a consumer resumes it (or it is deleted by management)

    def session_ended(self, session) -> None:
        due = [w for w in self._waiting if w[0] == session and w[1] == SESSION_END]
        if due:
            self._waiting = [w for w in self._waiting if not (w[0] == session and w[1] == SESSION_END)]
            for _, _, start in due:
                start()

    def connection_closed(self) -> None:
        waiting, self._waiting = self._waiting, []
        for _, _, start in waiting:
            start()
