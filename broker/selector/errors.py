"""The one exception a selector that does not compile raises.

Callers (consumer attach, queue and divert configuration) map it to `amqp:invalid-field` or to a
configuration error naming the key; `str(error)` is the one line they show.
"""
from __future__ import annotations


class SelectorError(Exception):
    """A selector that does not parse or is not a valid boolean expression.

    `position` is the 0-based character offset in the selector text (None if unknown),
    `expected` the names of the tokens that would have been accepted there (may be empty).
    """

    def __init__(self, message: str, position: int | None = None, expected: list[str] | None = None):
        self.reason = message
        self.position = position
        self.expected = list(expected or [])
        if position is None:
            line = f"syntax error: {message}"
        else:
            line = f"syntax error at position {position}: {message}"
        super().__init__(line)
