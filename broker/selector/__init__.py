"""JMS / SQL-92 message selectors: text in, a predicate over a property lookup out.

    sel = compile_selector("region = 'EU' AND price > 100")
    sel.matches(properties.get)      # True only when the selector is TRUE
    sel.evaluate(properties.get)     # True, False or None (UNKNOWN)

The lookup is any callable from an identifier to its value (None when missing or null). This
package knows no message and no AMQP: broker.core.selectable maps a message to a lookup.
docs/selectors.md lists every decision where Artemis and the JMS specification differ.
"""
from __future__ import annotations

import functools

from .errors import SelectorError
from .evaluate import Selector
from .parser import parse

__all__ = ["compile_selector", "SelectorError", "Selector"]


@functools.lru_cache(maxsize=4096)
def compile_selector(text: str) -> Selector:
    """Compile (once per distinct text) or raise SelectorError."""
    if not isinstance(text, str):
        raise TypeError(f"a selector is text, not {type(text).__name__}")
    return Selector(text, parse(text))
