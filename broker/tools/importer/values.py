"""Small value conversions shared by both importers: sizes, booleans, `${...}` placeholders,
Java `.properties` files."""
from __future__ import annotations

import re
from pathlib import Path

from .notes import Notes

_SIZE = re.compile(r"^\s*(-?\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}
_PLACEHOLDER = re.compile(r"\$\{([^}:]*)(?::([^}]*))?\}")


def size_bytes(text: str) -> int | None:
    """`10M`, `100KB`, `1 mb`, `-1` (Artemis ByteUtil and ActiveMQ's memory sizes: powers of
    1024), or None when it is not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def boolean(text: str) -> bool | None:
    t = text.strip().lower()
    return True if t == "true" else False if t == "false" else None


def integer(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


class Placeholders:
    """`${name}` / `${name:default}` (Artemis) resolved from the properties Hermod can see
    beside the file; an unresolved one is one note and its default (or the caller's)."""

    def __init__(self, known: dict[str, str], notes: Notes):
        self.known = known
        self.notes = notes

    def resolve(self, text: str, line: int, fallback: str | None = None) -> str | None:
        """`text` with its placeholders filled in; None when one has no value and no default
        and the caller gave no fallback (the caller then leaves the setting out)."""
        missing: list[str] = []

        def fill(m: re.Match) -> str:
            name, default = m.group(1), m.group(2)
            if name in self.known:
                return self.known[name]
            missing.append(name)
            return default if default is not None else "\0"

        out = _PLACEHOLDER.sub(fill, text)
        if not missing:
            return out
        if "\0" not in out:
            self.notes.say(line, f"placeholder ${{{missing[0]}}} has no value here; "
                                 f"used its default: {out!r}")
            return out
        if fallback is not None:
            self.notes.say(line, f"placeholder ${{{missing[0]}}} has no value here; "
                                 f"used {fallback!r} instead")
            return fallback
        self.notes.say(line, f"placeholder ${{{missing[0]}}} has no value here; the setting is left out")
        return None


def read_properties(path: Path) -> dict[str, str]:
    """A Java `.properties` file: `key=value` or `key: value` or `key value`, `#`/`!` comments,
    backslash line continuations. Enough for users, roles and credentials files."""
    out: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if not line or line[0] in "#!":
            continue
        m = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        out[key.replace("\\", "")] = value.strip()
    return out
