"""Non-Python AMQP 1.0 clients (rhea on Node.js, Proton C, a JMS-style rhea client) as test tools.

The clients live in interop/ and print one JSON object per line on stdout (see interop/README.md);
`interop/setup.sh` installs / builds them when missing and is run once per session here. A client
whose toolchain cannot be installed on this machine at all makes its tests skip with the reason;
any other setup failure fails them.

Synchronisation is on the clients' own output ("ready", "message", "summary" lines, exit), each
wait bounded; there are no sleeps.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "interop"
RHEA = INTEROP / "rhea"
PROTONC_BUILD = INTEROP / "protonc" / "build"
WAIT = 15  # seconds: bound on any single wait for a client's output
CLIENT_TIMEOUT = 10  # seconds: a client gives up by itself (printing what it got) after this long


# --------------------------------------------------------------------------------------------
# setup
# --------------------------------------------------------------------------------------------

_setup_results: dict[str, tuple[str, str]] = {}


def setup_component(component: str) -> None:
    """Run interop/setup.sh for one component (once per session); skip or fail as it says."""
    if component not in _setup_results:
        try:
            proc = subprocess.run(["bash", str(INTEROP / "setup.sh"), component], cwd=ROOT,
                                  capture_output=True, text=True, timeout=900,
                                  env=dict(os.environ, HERMOD_PYTHON=sys.executable))
            out = proc.stdout + proc.stderr
            status = next((line.split(f"interop-setup: {component} ", 1)[1]
                           for line in proc.stdout.splitlines() if line.startswith(f"interop-setup: {component} ")),
                          f"failed: no status line (exit {proc.returncode}): {out[-2000:]}")
        except subprocess.TimeoutExpired as e:
            status = f"failed: interop/setup.sh {component} took longer than {e.timeout} s"
        _setup_results[component] = (status.split(":", 1)[0].strip(), status)
    kind, status = _setup_results[component]
    if kind == "ready":
        return
    if kind == "unavailable":
        pytest.skip(f"{component} client toolchain cannot be installed here: {status}")
    pytest.fail(f"interop/setup.sh {component}: {status}", pytrace=False)


# --------------------------------------------------------------------------------------------
# client processes
# --------------------------------------------------------------------------------------------

def node() -> str:
    path = shutil.which("node") or shutil.which("nodejs")
    if path is None:
        pytest.fail("interop/setup.sh reported rhea ready but no node is on PATH", pytrace=False)
    return path


class ClientFailed(AssertionError):
    pass


@dataclass
class Result:
    """A finished client run: exit status and every JSON line it printed."""
    name: str
    rc: int
    events: list[dict]
    stderr: str

    @property
    def messages(self) -> list[dict]:
        return [e for e in self.events if e.get("event") == "message"]

    @property
    def bodies(self) -> list:
        return [m["body"] for m in self.messages]

    @property
    def summary(self) -> dict:
        found = [e for e in self.events if e.get("event") == "summary"]
        assert found, f"{self.name} printed no summary\n{self.transcript()}"
        return found[-1]

    @property
    def errors(self) -> list[dict]:
        return [e for e in self.events if e.get("event") == "error"]

    def transcript(self) -> str:
        lines = "\n".join(json.dumps(e) for e in self.events)
        return f"--- {self.name} exit {self.rc}\n{lines}\n--- stderr\n{self.stderr}"

    def ok(self) -> Result:
        """Assert a clean exit and return self."""
        assert self.rc == 0, f"{self.name} failed\n{self.transcript()}"
        return self


@dataclass
class ClientProcess:
    """A running client; its stdout is parsed line by line as it arrives."""
    name: str
    argv: list[str]
    cwd: Path
    events: list[dict] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "unparsed", "line": line}
            with self._cond:
                self.events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _snapshot(self) -> Result:
        return Result(self.name, self.proc.returncode if self.proc.returncode is not None else -1,
                      list(self.events), "".join(self.stderr_lines))

    def wait_event(self, kind: str, count: int = 1, timeout: float = WAIT) -> list[dict]:
        """Wait until `count` events of `kind` were printed; fail at once if the client ends first
        or reports an error."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if e.get("event") == kind]
                if len(found) >= count:
                    return found[:count]
                bad = [e for e in self.events if e.get("event") in ("error", "timeout")]
                if bad or self._eof:
                    raise ClientFailed(f"{self.name} ended or failed before {count} '{kind}' event(s)\n"
                                       f"{self._snapshot().transcript()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClientFailed(f"{self.name}: no {count} '{kind}' event(s) within {timeout} s\n"
                                       f"{self._snapshot().transcript()}")
                self._cond.wait(left)

    def ready(self, count: int = 1, timeout: float = WAIT) -> ClientProcess:
        """Wait for the client's 'ready' line(s): its link(s) are attached at the broker."""
        self.wait_event("ready", count, timeout)
        return self

    def finish(self, timeout: float = WAIT) -> Result:
        """Wait (bounded) for the client to exit by itself and return what it printed."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self._out.join(2)
            raise ClientFailed(f"{self.name} did not finish within {timeout} s\n{self._snapshot().transcript()}")
        self._out.join(5)
        self._err.join(5)
        return self._snapshot()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _argv(options: dict) -> list[str]:
    """count=3, capability="topic", durable=True, property=["a=1", "b=2"] -> --count 3 ..."""
    out: list[str] = []
    for key, value in options.items():
        flag = "--" + key.rstrip("_").replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


class Tool:
    """One client program; `start(...)` runs it in the background, `run(...)` to completion."""

    def __init__(self, name: str, prefix: list[str], cwd: Path, registry: list[ClientProcess]):
        self.name = name
        self.prefix = prefix
        self.cwd = cwd
        self.registry = registry

    def start(self, *positional: str, **options) -> ClientProcess:
        options.setdefault("timeout", CLIENT_TIMEOUT)
        argv = [*self.prefix, *positional, *_argv(options)]
        p = ClientProcess(f"{self.name} {' '.join(argv[len(self.prefix):])}", argv, self.cwd)
        self.registry.append(p)
        return p

    def run(self, *positional: str, timeout: float = WAIT, **options) -> Result:
        return self.start(*positional, **options).finish(timeout)


# --------------------------------------------------------------------------------------------
# broker-side views and small helpers
# --------------------------------------------------------------------------------------------

def queue_stats(url: str) -> dict[str, dict]:
    """queue name -> the broker's stat row, leaving out the management call's own reply queue."""
    from hermod.broker.tools.clients import management_call

    rows = management_call(url, "queue.stat")
    return {r["queue"]: r for r in rows
            if not (r["queue"] == r["address"] and r["consumers"] == 1 and r["routing_type"] == "anycast"
                    and len(r["queue"]) == 36 and r["added"] == 0)}


def require_selectors() -> None:
    """Selector tests need the broker's selector engine (issue 4): xfail while it is not in."""
    try:
        from hermod.broker.selector import compile_selector  # noqa: F401
    except ImportError:
        pytest.xfail("selectors land with issue 4")


def bodies(template: str, numbers) -> list[str]:
    """The bodies the clients' default template ("message {n}") gives for these numbers."""
    return [template.replace("{n}", str(n)) for n in numbers]


def eventually(predicate, timeout: float = WAIT, message: str = "condition"):
    """Poll the broker's view (a bounded wait, not a synchronisation of our own)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.02)
