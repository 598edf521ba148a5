"""Address patterns with words separated by `.`: `*` is exactly one word, `#` (or `>`, accepted
as a synonym) any number of words, including none. `news.#` matches `news`, `news.eu` and
`news.eu.sport`; `a.#.d` matches `a.d`; partial words such as `a.b*` are literal.

One matcher serves address settings, wildcard subscriptions, diverts and permissions.

Theory of operation: a pattern is a small nondeterministic automaton over words, one state per
pattern word (state `i`: the first `i` pattern words have matched). The set of live states is a
bit mask (a Python int), so reading one address word is a dictionary lookup and a few integer
operations: matching costs O(address words) for any pattern a client may write (names are at
most 1,024 bytes), never the O(words^2) of backtracking over `#`.
"""
from __future__ import annotations

from functools import lru_cache

ANY_WORDS = frozenset(("#", ">"))
ONE_WORD = "*"
# Results and compiled patterns are cached only for names of ordinary length: a cache keyed by
# 600 KB strings would hold gigabytes.
_CACHED_LENGTH = 1024


def is_wildcard(pattern: str) -> bool:
    return any(w in ANY_WORDS or w == ONE_WORD for w in pattern.split("."))


class _Pattern:
    """A pattern compiled to bit masks over its word positions (consecutive `#`s folded into
    one, which matches the same addresses)."""

    __slots__ = ("literal", "star", "hash", "accept")

    def __init__(self, pattern: str):
        words: list[str] = []
        for w in pattern.split("."):
            w = "#" if w in ANY_WORDS else w
            if w == "#" and words and words[-1] == "#":
                continue
            words.append(w)
        self.literal: dict[str, int] = {}  # word -> positions holding that literal word
        self.star = 0  # positions holding `*`
        self.hash = 0  # positions holding `#`
        for i, w in enumerate(words):
            bit = 1 << i
            if w == "#":
                self.hash |= bit
            elif w == ONE_WORD:
                self.star |= bit
            else:
                self.literal[w] = self.literal.get(w, 0) | bit
        self.accept = 1 << len(words)

    def _closure(self, states: int) -> int:
        # `#` may match no word: a live `#` position also makes the next one live. No two `#`
        # are adjacent, so one step is the whole closure.
        return states | ((states & self.hash) << 1)

    def matches(self, address: str) -> bool:
        literal, star, hash_ = self.literal, self.star, self.hash
        states = self._closure(1)
        for word in address.split("."):
            # Advance past a matching literal or `*`; a `#` stays put, eating the word.
            states = ((states & (literal.get(word, 0) | star)) << 1) | (states & hash_)
            if not states:
                return False
            states |= (states & hash_) << 1
        return bool(states & self.accept)


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> _Pattern:
    return _Pattern(pattern)


@lru_cache(maxsize=65536)
def _matches_cached(pattern: str, address: str) -> bool:
    return _compiled(pattern).matches(address)


def matches(pattern: str, address: str) -> bool:
    """True when `address` (a concrete name) matches `pattern`."""
    if pattern == address:
        return True
    if len(address) <= _CACHED_LENGTH and len(pattern) <= _CACHED_LENGTH:
        return _matches_cached(pattern, address)
    return _Pattern(pattern).matches(address)


def specificity(pattern: str) -> tuple[int, int, int, int]:
    """Sort key: a larger key is a more specific pattern (an exact name beats any wildcard;
    then more literal words; then fewer `#`; then fewer `*`)."""
    words = pattern.split(".")
    any_words = sum(1 for w in words if w in ANY_WORDS)
    one_word = sum(1 for w in words if w == ONE_WORD)
    literal = len(words) - any_words - one_word
    return (int(any_words == 0 and one_word == 0), literal, -any_words, -one_word)
