"""LIKE patterns: `%` is any run of characters, `_` exactly one, both match newlines.

The escape character escapes only `%`, `_` or itself; before any other character (or at the end
of the pattern) it is an ordinary character. Matching is case-sensitive and covers the whole value.

A pattern is split at its `%`s into fixed-width segments: the first must match at the start, the
last at the end, and each middle one is found leftmost after the previous one. Leftmost placement
is always safe for `%`/`_` patterns, so matching is linear in the value per segment and cannot
backtrack the way a `.*a.*a.*b` regular expression can (a selector must not be a denial of service).
"""
from __future__ import annotations

import re

_ANY_ONE = object()


def _tokens(pattern: str, escape: str | None):
    """Yield literal characters, `_ANY_ONE`, or None for `%`."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 < n and pattern[i + 1] in ("%", "_", escape):
                yield pattern[i + 1]
                i += 2
                continue
            yield c
        elif c == "%":
            yield None
        elif c == "_":
            yield _ANY_ONE
        else:
            yield c
        i += 1


class _Segment:
    """A run of literal characters and `_`s: fixed width."""

    __slots__ = ("width", "text", "regex")

    def __init__(self, items: list):
        self.width = len(items)
        if any(item is _ANY_ONE for item in items):
            self.text = None
            self.regex = re.compile(
                "".join("." if item is _ANY_ONE else re.escape(item) for item in items), re.DOTALL
            )
        else:
            self.text = "".join(items)
            self.regex = None

    def match_at(self, value: str, pos: int) -> bool:
        if self.text is not None:
            return value.startswith(self.text, pos)
        return self.regex.match(value, pos) is not None

    def find(self, value: str, start: int, end: int) -> int:
        """Leftmost start >= start of a match ending at or before end, or -1."""
        if self.text is not None:
            return value.find(self.text, start, end)
        m = self.regex.search(value, start, end)
        return -1 if m is None else m.start()


class LikeMatcher:
    __slots__ = ("pattern", "escape", "_segments", "_exact")

    def __init__(self, pattern: str, escape: str | None = None):
        self.pattern = pattern
        self.escape = escape
        segments: list[list] = [[]]
        for token in _tokens(pattern, escape):
            if token is None:
                if segments[-1] or len(segments) == 1:
                    segments.append([])
                # else: `%%` is one `%`
            else:
                segments[-1].append(token)
        self._exact = len(segments) == 1
        self._segments = [_Segment(items) for items in segments]

    def __call__(self, value: str) -> bool:
        segments = self._segments
        if self._exact:
            only = segments[0]
            return len(value) == only.width and only.match_at(value, 0)
        head, tail = segments[0], segments[-1]
        end = len(value) - tail.width
        if end < head.width:
            return False
        if not head.match_at(value, 0) or not tail.match_at(value, end):
            return False
        pos = head.width
        for segment in segments[1:-1]:
            found = segment.find(value, pos, end)
            if found < 0:
                return False
            pos = found + segment.width
        return True

    def __repr__(self) -> str:
        return f"LikeMatcher({self.pattern!r}, escape={self.escape!r})"
