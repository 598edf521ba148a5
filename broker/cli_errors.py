"""The command line's one kind of failure: a line for the user, exit status 2."""
from __future__ import annotations

import sys

EXIT_USAGE = 2


class CliError(Exception):
    """A one-line error for the user; exit status 2."""


def fail(message: str) -> int:
    print(f"hermod: {message}", file=sys.stderr)
    return EXIT_USAGE
