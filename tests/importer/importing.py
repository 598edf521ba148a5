"""Running `hermod import` as a user does, and real clients for the imported broker."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proton import Message
from proton.utils import BlockingConnection

FIXTURES = Path(__file__).parent / "fixtures"
TIMEOUT = 10


def hermod_import(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", "import", *args], capture_output=True,
                          text=True, timeout=timeout)


def imported(tmp_path: Path, product: str, fixture: str) -> Path:
    """The fixture converted into tmp_path/hermod.toml (exit 0 asserted)."""
    out = tmp_path / "hermod.toml"
    done = hermod_import(product, str(FIXTURES / fixture), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def connect(url: str, **kw) -> BlockingConnection:
    if "user" in kw:
        kw.setdefault("allowed_mechs", "PLAIN")
    return BlockingConnection(url, timeout=TIMEOUT, **kw)


def send(conn: BlockingConnection, address: str, *messages: Message) -> None:
    sender = conn.create_sender(address)
    for m in messages:
        sender.send(m)
    sender.close()


def bodies(receiver, n: int) -> list:
    got = []
    for _ in range(n):
        m = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        got.append(m.body)
    return got


def nothing_more(receiver, timeout: float = 0.5) -> bool:
    """True when no further message arrives within `timeout` (a bound on absence, not a sync)."""
    from proton import Timeout
    try:
        receiver.receive(timeout=timeout)
    except Timeout:
        return True
    return False
