"""A private RabbitMQ node (Debian's rabbitmq-server 3.10) for the bridge tests: its own node
name, ports (AMQP, distribution, and a private epmd), Mnesia and log directories under the
test's temporary directory, and the AMQP 1.0 plugin enabled through its own enabled_plugins
file. `make rabbitmq-deps` installs the package where it is missing."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from bridge_testing import free_port

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # not /usr/sbin's: that one switches user
STARTED = "Starting broker... completed"


def missing() -> str | None:
    """Why no node can be started here, or None."""
    if not SERVER.exists():
        return "rabbitmq-server is not installed (make rabbitmq-deps installs it)"
    if shutil.which("epmd") is None:
        return "epmd (Erlang) is not installed"
    return None


class RabbitNode:
    def __init__(self, base: Path):
        self.base = base
        self.port = free_port()
        self.epmd_port = free_port()
        self.proc: subprocess.Popen | None = None
        base.mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
        (base / "rabbitmq.conf").write_text("loopback_users = none\n")
        self.env = dict(os.environ, HOME=str(base), RABBITMQ_NODENAME=f"hermod-bridge-{self.port}@localhost",
                        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
                        RABBITMQ_DIST_PORT=str(free_port()), ERL_EPMD_PORT=str(self.epmd_port),
                        RABBITMQ_MNESIA_BASE=str(base / "mnesia"), RABBITMQ_LOG_BASE=str(base / "log"),
                        RABBITMQ_ENABLED_PLUGINS_FILE=str(base / "enabled_plugins"),
                        RABBITMQ_CONFIG_FILE=str(base / "rabbitmq"), RABBITMQ_PID_FILE=str(base / "pid"))

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> RabbitNode:
        log = open(self.base / "stdout.log", "w")
        self.proc = subprocess.Popen([str(SERVER)], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while STARTED not in (self.base / "stdout.log").read_text(errors="replace") or not self._accepting():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.base / "stdout.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"RabbitMQ did not start:\n{tail}")
            time.sleep(0.2)  # polling a process we cannot be told about (bounded above)
        return self

    def _accepting(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """The node's process group (the start script and the Erlang VM), then its epmd."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=10)
