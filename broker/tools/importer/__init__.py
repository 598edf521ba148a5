"""`hermod import artemis|activemq FILE.xml [-o hermod.toml]`: an old broker's XML configuration
converted to Hermod's TOML.

The TOML goes to stdout (or `-o`); every element that cannot be carried over is exactly one line
on stderr naming it (file, line, element) and why, and the rest still converts (exit 0). A file
that cannot be read at all (missing, too big, not XML, a DTD, the wrong root element) is one line
and exit 2. The result is checked with Hermod's own config reader before it is written.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Callable

from ...config import ConfigError, parse
from ..progress import Progress
from . import activemq, artemis
from .notes import Notes
from .toml_out import dumps
from .xmlsafe import ImportFailed, parse_file

CONVERTERS = {"artemis": artemis.convert, "activemq": activemq.convert}
ORDER = ("server", "listener", "tls", "store", "security", "address_settings", "address", "divert",
         "virtual_topic", "composite")
PRODUCTS = {"artemis": "ActiveMQ Artemis", "activemq": "ActiveMQ Classic"}


STEPS = 4  # read the XML, convert it, check the result with Hermod's config reader, write it


def _no_step() -> None:
    pass


def convert_file(kind: str, source: Path, step: Callable[[], None] = _no_step) -> tuple[str, list[str]]:
    """(TOML text, notes); ImportFailed when the file as a whole cannot be converted. `step()`
    is called as each of the first three STEPS ends (the progress line)."""
    root = parse_file(source)
    step()
    notes = Notes(str(source))
    converted = CONVERTERS[kind](root, source, notes)
    step()
    doc = {key: converted[key] for key in ORDER if key in converted}
    text = dumps(doc, [f"Converted by `hermod import {kind}` from {source.name} ({PRODUCTS[kind]}).",
                       "Elements that could not be carried over were listed on stderr when it ran."])
    try:
        parse(tomllib.loads(text))
    except (ConfigError, tomllib.TOMLDecodeError) as e:
        # A converter bug, not the user's file: say so rather than write a file `run` refuses.
        raise ImportFailed(f"{source}: the converted configuration is not valid ({e}); please report this") from None
    step()
    return text, notes.lines


def run(kind: str, source: str, output: str | None, progress: bool | None = None) -> int:
    """The CLI command; returns the exit status. `progress`: the progress line on stderr (None:
    only on a terminal), in steps, since a configuration is one file, not messages."""
    line = Progress(f"import {kind} {source}", progress, unit="steps")
    done = [0]

    def step() -> None:
        done[0] += 1
        line.update(done[0], STEPS)

    line.update(0, STEPS)
    try:
        text, notes = convert_file(kind, Path(source), step)
    except ImportFailed as e:
        print(f"hermod: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    if output is None:
        sys.stdout.write(text)
    else:
        try:
            Path(output).write_text(text)
        except OSError as e:
            print(f"hermod: {output}: cannot write: {e.strerror or e}", file=sys.stderr)
            return 2
    line.update(STEPS, STEPS, final=True)
    return 0
