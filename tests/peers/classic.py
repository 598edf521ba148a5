"""A private ActiveMQ Classic 5.17.2 broker (Debian's `activemq` package) as a peer for
comparison tests and benchmarks: its own instance directory (conf, data, KahaDB) under a given
path, OpenWire, STOMP and MQTT transport connectors on free loopback ports, optional users and
authorization entries. Started as `java -jar /usr/share/activemq/bin/activemq.jar start
xbean:file:...` in its own session, ready once the log says "started" and every port accepts,
stopped with SIGTERM (the JVM's shutdown hook stops the broker cleanly), then SIGKILL.

Importable from benchmarks (`sys.path.insert(0, "tests/peers")`); the pytest fixture is in
tests/peers/conftest.py. `make activemq-deps` installs the package where it is missing.

    with ClassicBroker(tmp_path / "classic", persistent=False) as classic:
        classic.stomp_port, classic.openwire_url, classic.pid
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

ACTIVEMQ_HOME = Path("/usr/share/activemq")
RUN_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
VERSION = "5.17.2"
READY = re.compile(r"Apache ActiveMQ \S+ \(.*\) started")
PROTOCOLS = ("openwire", "stomp", "mqtt")
SCHEMES = {"openwire": "tcp", "stomp": "stomp", "mqtt": "mqtt"}

# The module opens that Debian's /usr/bin/activemq passes on Java 9 and later (Spring/XBean reflect
# into these packages while loading activemq.xml).
JAVA_OPENS = ["--add-reads=java.xml=java.logging"] + [
    arg for pkg in ("java.base/java.security", "java.base/java.net", "java.base/java.lang", "java.base/java.util",
                    "java.naming/javax.naming.spi", "java.base/java.util.concurrent",
                    "java.base/java.util.concurrent.atomic")
    for arg in ("--add-opens", f"{pkg}=ALL-UNNAMED")]

LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d{HH:mm:ss.SSS} %5p | %m%n
"""


def missing() -> str | None:
    """Why no Classic broker can be started here, or None."""
    if not RUN_JAR.exists():
        return "ActiveMQ Classic is not installed (Debian's activemq package; make activemq-deps installs it)"
    if shutil.which("java") is None:
        return "no java on PATH (make java)"
    return None


def free_port() -> int:
    """A loopback port nobody listens on now (bound to port 0, then released for the broker)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class AuthEntry:
    """One Classic `authorizationEntry`: `destination` is a name or wildcard (`>`, `*`), the
    permissions are comma-separated group names."""
    destination: str
    kind: str = "queue"  # "queue" or "topic"
    read: str = ""
    write: str = ""
    admin: str = ""

    def xml(self) -> str:
        attrs = f"{self.kind}={quoteattr(self.destination)}"
        for name in ("read", "write", "admin"):
            if getattr(self, name):
                attrs += f" {name}={quoteattr(getattr(self, name))}"
        return f"<authorizationEntry {attrs}/>"


@dataclass
class Security:
    """`users`: name -> (password, comma-separated groups); `entries`: the authorization map
    (none: every authenticated user may do everything); `temp_groups`: who may use temporary
    destinations when there are entries."""
    users: dict[str, tuple[str, str]]
    entries: list[AuthEntry] = field(default_factory=list)
    anonymous: bool = False
    temp_groups: str = ""

    def xml(self) -> str:
        users = "\n".join(f"<authenticationUser username={quoteattr(u)} password={quoteattr(p)} groups={quoteattr(g)}/>"
                          for u, (p, g) in self.users.items())
        out = (f'<simpleAuthenticationPlugin anonymousAccessAllowed="{str(self.anonymous).lower()}">'
               f"<users>{users}</users></simpleAuthenticationPlugin>")
        if self.entries:
            temp = ""
            if self.temp_groups:
                g = quoteattr(self.temp_groups)
                temp = (f"<tempDestinationAuthorizationEntry><tempDestinationAuthorizationEntry read={g} "
                        f"write={g} admin={g}/></tempDestinationAuthorizationEntry>")
            entries = "\n".join(e.xml() for e in self.entries)
            out += (f"<authorizationPlugin><map><authorizationMap><authorizationEntries>{entries}"
                    f"</authorizationEntries>{temp}</authorizationMap></map></authorizationPlugin>")
        return out


def activemq_xml(base: Path, ports: dict[str, int], persistent: bool, security: Security | None,
                 broker_name: str) -> str:
    data = base / "data"
    connectors = "\n".join(
        f'<transportConnector name="{p}" uri="{SCHEMES[p]}://127.0.0.1:{port}"/>' for p, port in ports.items())
    store = f'<persistenceAdapter><kahaDB directory="{data / "kahadb"}"/></persistenceAdapter>' if persistent else ""
    plugins = f"<plugins>{security.xml()}</plugins>" if security else ""
    return f"""<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName={quoteattr(broker_name)}
          persistent="{str(persistent).lower()}" dataDirectory="{data}" schedulerSupport="false">
    {store}
    {plugins}
    <transportConnectors>
{connectors}
    </transportConnectors>
  </broker>
</beans>
"""


class ClassicBroker:
    """A private ActiveMQ Classic instance under `base` (created; kept after stop for its log,
    `base / "broker.log"`). `persistent=False`: no KahaDB, messages in memory only."""

    def __init__(self, base: Path, *, persistent: bool = True, security: Security | None = None,
                 heap: str = "512m", broker_name: str = "classic", protocols: tuple[str, ...] = PROTOCOLS):
        self.base = Path(base)
        self.persistent, self.security, self.heap = persistent, security, heap
        self.broker_name, self.protocols = broker_name, protocols
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen | None = None
        self.log = self.base / "broker.log"
        self._log_from = 0  # where this start's output begins in the log (a restart appends)

    # -- addresses --------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def openwire_port(self) -> int:
        return self.ports["openwire"]

    @property
    def stomp_port(self) -> int:
        return self.ports["stomp"]

    @property
    def mqtt_port(self) -> int:
        return self.ports["mqtt"]

    @property
    def openwire_url(self) -> str:
        return f"tcp://127.0.0.1:{self.openwire_port}"

    # -- life -------------------------------------------------------------------------------------
    def start(self, timeout: float = 90, attempts: int = 3) -> ClassicBroker:
        """Start and wait until ready; a port taken between choosing and binding (another test's
        broker) gets fresh ports, up to `attempts` times."""
        why = missing()
        if why:
            raise RuntimeError(why)
        for attempt in range(attempts):
            self._launch()
            try:
                self._wait_ready(timeout)
                return self
            except RuntimeError as e:
                self.stop()
                if "Address already in use" not in str(e) or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _launch(self, fresh: bool = True) -> None:
        """Write the instance (fresh: new ports, empty data) and start the JVM."""
        conf, data = self.base / "conf", self.base / "data"
        if fresh:
            if data.exists():
                shutil.rmtree(data)
            self.ports = {p: free_port() for p in self.protocols}
        for d in (conf, data, self.base / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        (conf / "activemq.xml").write_text(activemq_xml(self.base, self.ports, self.persistent, self.security,
                                                        self.broker_name))
        (conf / "log4j.properties").write_text(LOG4J)
        cmd = ["java", f"-Xms{self.heap}", f"-Xmx{self.heap}", *JAVA_OPENS,
               f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={self.base}", f"-Dactivemq.conf={conf}",
               f"-Dactivemq.data={data}", f"-Djava.io.tmpdir={self.base / 'tmp'}",
               f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
               "-jar", str(RUN_JAR), "start", f"xbean:file:{conf / 'activemq.xml'}"]
        self._log_from = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.base, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_bytes()[self._log_from:].decode(errors="replace")
            if self.proc.poll() is not None:
                raise RuntimeError(f"ActiveMQ Classic exited {self.proc.returncode}:\n{self.tail(text)}")
            if "Address already in use" in text:
                raise RuntimeError(f"ActiveMQ Classic could not bind:\n{self.tail(text)}")
            if READY.search(text) and all(accepts(p) for p in self.ports.values()):
                return
            time.sleep(0.1)
        raise RuntimeError(f"ActiveMQ Classic not ready in {timeout:.0f} s:\n{self.tail()}")

    def tail(self, text: str | None = None, lines: int = 20) -> str:
        if text is None:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def restart(self, timeout: float = 90) -> ClassicBroker:
        """Stop and start again on the same ports with the same data (KahaDB survives)."""
        assert self.ports, "never started"
        self.stop()
        self._launch(fresh=False)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> ClassicBroker:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def version() -> str:
    """The installed package's version (dpkg), or the jar's."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "activemq"], capture_output=True, text=True)
    return f"activemq {out.stdout.strip() or VERSION}"


if __name__ == "__main__":  # a manual check: start, print the ports, stop on Enter
    import sys
    import tempfile
    with ClassicBroker(Path(tempfile.mkdtemp(prefix="classic-")), persistent="--memory" not in sys.argv) as b:
        print(f"pid {b.pid} ports {b.ports} log {b.log}", flush=True)
        if os.isatty(0):
            input("Enter stops it ")
