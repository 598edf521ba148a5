"""Rows printed as columns: aligned on a terminal; one space between cells when piped, as
before, so scripts that match or split the lines keep working (as `ls` does). Either way
every cell is one word."""
from __future__ import annotations

import sys


def aligned(rows: list[list], pad: bool | None = None) -> list[str]:
    """Each row's cells padded to the widest cell of its column when `pad` (default: stdout
    is a terminal); trailing spaces dropped."""
    text = [[str(c) for c in row] for row in rows]
    if pad is None:
        pad = sys.stdout.isatty()
    if not pad:
        return [" ".join(c for c in row if c) for row in text]
    widths = [max(len(row[i]) for row in text if i < len(row)) for i in range(max(map(len, text), default=0))]
    return [" ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in text]
