"""Address patterns with words separated by `.`: `*` is exactly one word, `#` (or `>`, accepted
as a synonym) any number of words, including none. `news.#` matches `news`, `news.eu` and
`news.eu.sport`; `a.#.d` matches `a.d`; partial words such as `a.b*` are literal.

One matcher serves address settings, wildcard subscriptions, diverts and permissions.
"""
from __future__ import annotations

from functools import lru_cache

ANY_WORDS = frozenset(("#", ">"))
ONE_WORD = "*"


def is_wildcard(pattern: str) -> bool:
    return any(w in ANY_WORDS or w == ONE_WORD for w in pattern.split("."))


@lru_cache(maxsize=65536)
def matches(pattern: str, address: str) -> bool:
    """True when `address` (a concrete name) matches `pattern`."""
    if pattern == address:
        return True
    return _match(tuple(pattern.split(".")), tuple(address.split(".")))


def _match(pw: tuple[str, ...], aw: tuple[str, ...]) -> bool:
    # Dynamic programming over (pattern word i, address word j): patterns are short, and the
    # result is cached per (pattern, address), so clarity wins over cleverness here.
    n, m = len(pw), len(aw)
    reach = [[False] * (m + 1) for _ in range(n + 1)]
    reach[0][0] = True
    for i in range(n):
        w = pw[i]
        for j in range(m + 1):
            if not reach[i][j]:
                continue
            if w in ANY_WORDS:
                for k in range(j, m + 1):
                    reach[i + 1][k] = True
            elif j < m and (w == ONE_WORD or w == aw[j]):
                reach[i + 1][j + 1] = True
    return reach[n][m]


def specificity(pattern: str) -> tuple[int, int, int, int]:
    """Sort key: a larger key is a more specific pattern (an exact name beats any wildcard;
    then more literal words; then fewer `#`; then fewer `*`)."""
    words = pattern.split(".")
    any_words = sum(1 for w in words if w in ANY_WORDS)
    one_word = sum(1 for w in words if w == ONE_WORD)
    literal = len(words) - any_words - one_word
    return (int(any_words == 0 and one_word == 0), literal, -any_words, -one_word)
