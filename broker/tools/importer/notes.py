"""What the import could not carry over: exactly one stderr line per element."""
from __future__ import annotations

from .xmlsafe import Node


class Notes:
    def __init__(self, source: str):
        self.source = source
        self.lines: list[str] = []
        self._noted: set[int] = set()

    def skip(self, node: Node, why: str) -> None:
        """`node` is left out, because `why`."""
        self.note(node, f"not imported: {why}")

    def note(self, node: Node, text: str) -> None:
        """One line about `node` (imported in part, or left out); a second note on the same
        element is dropped, so each element costs at most one line."""
        if id(node) in self._noted:
            return
        self._noted.add(id(node))
        self.lines.append(f"{self.source}:{node.line}: {node.label()}: {text}")

    def say(self, line_no: int, text: str) -> None:
        """A note about a value rather than an element (a placeholder, a password)."""
        self.lines.append(f"{self.source}:{line_no}: {text}")
