"""Debian's ActiveMQ Classic 5.17.2 (package `activemq`) as a private broker with only a STOMP
transport, for the tests that run the same scenarios against it and Hermod (`make stomp-deps`
installs it). Non-persistent, no JMX; started on a free port, stopped by its process id."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

JAR = Path("/usr/share/activemq/bin/activemq.jar")

CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="classic" dataDirectory="${activemq.data}"
          useJmx="false" persistent="false" schedulerSupport="false">
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:PORT"/>
    </transportConnectors>
  </broker>
</beans>
"""


def available() -> bool:
    return JAR.exists() and shutil.which("java") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Classic:
    """A running ActiveMQ; `address` is "127.0.0.1:PORT" as `BrokerProcess.address` is."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> Classic:
        conf = self.directory / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.directory / "data").mkdir(exist_ok=True)
        (conf / "activemq.xml").write_text(CONFIG.replace("PORT", str(self.port)))
        self.log = open(self.directory / "activemq.log", "w")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256M", "-cp", str(JAR), "-Dactivemq.home=/usr/share/activemq",
             f"-Dactivemq.base={self.directory}", f"-Dactivemq.conf={conf}", f"-Dactivemq.data={self.directory / 'data'}",
             "org.apache.activemq.console.Main", "start", f"xbean:file:{conf / 'activemq.xml'}"],
            cwd=self.directory, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ActiveMQ exited: {(self.directory / 'activemq.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
                    if s.recv(9) == b"CONNECTED":
                        return self
            except OSError:
                pass
            time.sleep(0.5)  # polling a starting JVM: a bounded wait for the port to answer
        self.stop()
        raise RuntimeError("ActiveMQ did not answer STOMP in time")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
