"""The scripted ActiveMQ Classic JMS client (java/OwClient.java, compiled once with plain javac
against Debian's libactivemq-java): one JVM per client, driven one command a line."""
from __future__ import annotations

import hashlib
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote, unquote_plus

from openwire_samples import classpath

SOURCE = Path(__file__).with_name("java") / "OwClient.java"


EXTRA_JARS = ["/usr/share/java/geronimo-j2ee-management-1.1-spec.jar"]  # the JMS connection's stats


def compiled() -> str:
    cp = ":".join([classpath(), *EXTRA_JARS])
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"hermod-owclient-{os.getuid()}-{digest}"
    if not (out / "OwClient.class").exists():
        tmp = Path(tempfile.mkdtemp(prefix=out.name + "-"))
        subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", cp, str(SOURCE)],
                       check=True, capture_output=True, timeout=300)
        try:
            tmp.rename(out)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"{out}:{cp}"


def q(value) -> str:
    """A value as the client reads it (URL-encoded; None as `-`)."""
    return "-" if value is None else quote(str(value), safe="")


class JmsError(Exception):
    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"{java_class}: {message}")
        self.java_class = java_class
        self.message = message


class OwClient:
    def __init__(self, port: int, options: str = "") -> None:
        self.url = f"tcp://127.0.0.1:{port}" + (f"?{options}" if options else "")
        self.proc = subprocess.Popen(["java", "-cp", compiled(), "OwClient"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def raw(self, line: str, timeout: float = 30) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.lines.get(timeout=timeout)
        if answer is None:
            raise EOFError(f"the Java client ended (after {line!r})")
        return answer

    def __call__(self, *words, timeout: float = 30) -> str:
        answer = self.raw(" ".join(str(w) for w in words), timeout)
        if answer.startswith("ERR "):
            _, cls, message = (answer.split(" ", 2) + [""])[:3]
            raise JmsError(cls, unquote_plus(message) if message != "-" else "")
        assert answer.startswith("OK"), answer
        return answer[3:]

    def connect(self, user=None, password=None, client_id=None) -> None:
        self("connect", q(self.url), q(user), q(password), q(client_id))

    def receive(self, consumer: str, timeout_ms: int = 5000) -> dict | None:
        answer = self("receive", consumer, timeout_ms, timeout=timeout_ms / 1000 + 30)
        if answer == "NONE":
            return None
        out: dict = {}
        for word in answer.split(" ")[1:]:
            key, _, value = word.partition("=")
            out[key] = None if value == "-" else unquote_plus(value)
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
