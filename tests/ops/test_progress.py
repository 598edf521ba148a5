"""A progress line on long CLI operations (issue 15, item 4): `hermod queue move|purge|retry` and
`hermod replay` write it to stderr when stderr is a terminal or with --progress (used here, on a
pipe); stdout keeps its one answer line, and without the flag a pipe gets no progress at all."""
from __future__ import annotations

import re
import subprocess
import sys

from proton import Message
from proton.utils import BlockingConnection

from hermod_testing import ROOT

COUNT = 300


def hermod(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def fill(url: str, address: str, count: int) -> None:
    conn = BlockingConnection(url, timeout=10)
    try:
        sender = conn.create_sender(address)
        for i in range(count):
            sender.send(Message(body=f"m{i}"))
    finally:
        conn.close()


def progress_lines(stderr: str, label: str) -> list[tuple[int, int]]:
    found = [re.fullmatch(rf"{re.escape(label)}: (\d+) of (\d+) messages \(\d+%\)", line)
             for line in stderr.splitlines()]
    assert all(found), f"unexpected stderr: {stderr!r}"
    return [(int(m.group(1)), int(m.group(2))) for m in found]


def test_move_with_progress_reports_from_zero_to_all(broker):
    fill(broker.url, "src", COUNT)
    assert hermod("queue", "create", "dst", "--url", broker.url).returncode == 0
    result = hermod("queue", "move", "src", "--to", "dst", "--url", broker.url, "--progress")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"moved {COUNT} messages from src to dst\n"
    lines = progress_lines(result.stderr, "move src")
    assert lines[0] == (0, COUNT) and lines[-1] == (COUNT, COUNT)
    assert [done for done, _ in lines] == sorted(done for done, _ in lines)


def test_purge_with_progress_and_without(broker):
    fill(broker.url, "junk", COUNT)
    quiet = hermod("queue", "purge", "junk", "--url", broker.url, "--filter", "1 = 0")
    assert quiet.returncode == 0 and quiet.stderr == ""  # a pipe and no --progress: no line
    result = hermod("queue", "purge", "junk", "--url", broker.url, "--progress")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"removed {COUNT} messages from junk\n"
    assert progress_lines(result.stderr, "purge junk")[-1] == (COUNT, COUNT)


def test_progress_on_a_missing_queue_is_the_usual_one_line_error(broker):
    result = hermod("queue", "move", "nothere", "--to", "dst", "--url", broker.url, "--progress")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "nothere" in result.stderr
