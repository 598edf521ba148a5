"""The same JMS scenarios against ActiveMQ Classic 5.17.2 (Debian's libactivemq-java, embedded:
java/ClassicBroker.java) and against Hermod, with the same Classic client: the same messages, in
the same order, with the same redelivery flags and counts, and the same exceptions (issue 30,
"where the contract follows Classic"). Ids and timestamps differ by nature and are left out."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from owclient import EXTRA_JARS, JmsError, OwClient
from test_ow_basic import port_of

JARS = ["activemq-broker.jar", "activemq-client.jar", "activemq-openwire-legacy.jar", "hawtbuf.jar",
        "slf4j-api.jar", "slf4j-nop.jar", "geronimo-jms_1.1_spec.jar", "commons-logging.jar"]
SOURCE = Path(__file__).with_name("java") / "ClassicBroker.java"
VOLATILE = ("id", "ts", "exp")


def classic_classpath() -> str:
    jars = [str(Path("/usr/share/java") / j) for j in JARS] + EXTRA_JARS
    missing = [j for j in jars if not Path(j).exists()]
    if missing:
        raise RuntimeError(f"the Classic comparison needs `make openwire-java` (missing: {missing})")
    cp = ":".join(jars)
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"hermod-classic-{os.getuid()}-{digest}"
    if not (out / "ClassicBroker.class").exists():
        tmp = Path(tempfile.mkdtemp(prefix=out.name + "-"))
        subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", cp, str(SOURCE)], check=True,
                       capture_output=True, timeout=300)
        try:
            tmp.rename(out)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"{out}:{cp}"


@pytest.fixture(scope="module")
def classic_port():
    proc = subprocess.Popen(["java", "-cp", classic_classpath(), "ClassicBroker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield int(line.split()[1])
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def hermod_port(start_module_broker):
    return port_of(start_module_broker())


def shown(m: dict | None) -> dict | None:
    return None if m is None else {k: v for k, v in m.items() if k not in VOLATILE}


def failure(action) -> str:
    try:
        action()
    except JmsError as e:
        return e.java_class
    return "no exception"


def clean_close_and_crash(port: int, tag: str) -> list:
    out = []
    c = OwClient(port)
    c.connect()
    c("session", "s", "false", "client")
    c("producer", "p", "s", f"queue:cmp.redeliver.{tag}", "persistent")
    for i in range(4):
        c("send", "p", "text", f"r{i}")
    c("consumer", "c", "s", f"queue:cmp.redeliver.{tag}")
    out += [shown(c.receive("c")) for _ in range(2)]
    c("ack", "c")
    out.append(shown(c.receive("c")))
    c("close")
    c.close()
    d = OwClient(port)
    d.connect()
    d("session", "s", "false", "client")
    d("consumer", "c", "s", f"queue:cmp.redeliver.{tag}")
    out += [shown(d.receive("c")) for _ in range(2)]
    d.kill()
    e = OwClient(port)
    e.connect()
    e("session", "s", "false", "auto")
    e("consumer", "c", "s", f"queue:cmp.redeliver.{tag}")
    # Classic counts the clean close's give-back in JMSXDeliveryCount; the contract does not
    # ("a clean close gives unacknowledged messages back marked redelivered without counting an
    # attempt"), so after the crash r2 says 3 on Classic and 2 on Hermod: counts left out here.
    out += [{k: v for k, v in (shown(e.receive("c")) or {}).items() if k != "count"} for _ in range(2)]
    out.append(shown(e.receive("c", 300)))
    e.close()
    return out


def transactions_and_types(port: int, tag: str) -> list:
    out = []
    c = OwClient(port)
    c.connect()
    try:
        c("session", "t", "true", "auto")
        c("session", "a", "false", "auto")
        c("producer", "p", "a", f"queue:cmp.tx.{tag}", "persistent")
        c("send", "p", "text", "t1", "corr=c", "type=ty", "prio=6", "group=g", "prop.i=int:1", "prop.h=short:2",
          "prop.f=float:0.5", "prop.y=byte:3", "prop.l=long:4", "prop.s=string:s", "prop.b=boolean:false")
        c("send", "p", "map", "a%3Dint%3A1%3Bb%3Dchar%3Az")
        c("send", "p", "stream", "short%3A1%3Bdouble%3A2.5%3Bbytes%3A0a0b")
        c("consumer", "c", "t", f"queue:cmp.tx.{tag}")
        out += [shown(c.receive("c")) for _ in range(3)]
        c("rollback", "t")
        out += [shown(c.receive("c")) for _ in range(3)]
        c("commit", "t")
        out.append(shown(c.receive("c", 300)))
        c("producer", "tp", "t", f"queue:cmp.tx.{tag}", "persistent")
        c("send", "tp", "text", "uncommitted")
        c("rollback", "t")
        out.append(shown(c.receive("c", 300)))
    finally:
        c.close()
    return out


def browse_select_pull_and_exceptions(port: int, tag: str) -> list:
    out = []
    c = OwClient(port, "jms.prefetchPolicy.queuePrefetch=0")
    c.connect(client_id=f"cmp-{tag}")
    try:
        c("session", "s", "false", "auto")
        c("producer", "p", "s", f"queue:cmp.sel.{tag}", "persistent")
        for i, color in enumerate(("red", "blue", "red")):
            c("send", "p", "text", f"{color}{i}", f"prop.color=string:{color}")
        out.append(c("browse", "s", f"queue:cmp.sel.{tag}"))
        c("consumer", "red", "s", f"queue:cmp.sel.{tag}", "selector=color%3D%27red%27")
        out += [shown(c.receive("red")) for _ in range(2)] + [shown(c.receive("red", 300))]
        out.append(c("browse", "s", f"queue:cmp.sel.{tag}"))
        out.append(failure(lambda: c("consumer", "bad", "s", f"queue:cmp.sel.{tag}", "selector=a%20%3D%3D")))
        c("consumer", "d", "s", f"topic:cmp.topic.{tag}", "durable=sub")
        out.append(failure(lambda: c("unsubscribe", "s", "sub")))
        c("closeconsumer", "d")
        c("producer", "t", "s", f"topic:cmp.topic.{tag}", "persistent")
        c("send", "t", "text", "offline")
        c("consumer", "d", "s", f"topic:cmp.topic.{tag}", "durable=sub")
        out.append(shown(c.receive("d")))
        c("closeconsumer", "d")
        c("unsubscribe", "s", "sub")
        out.append(failure(lambda: c("unsubscribe", "s", "sub")))
    finally:
        c.close()
    return out


@pytest.mark.parametrize("scenario", [clean_close_and_crash, transactions_and_types,
                                      browse_select_pull_and_exceptions], ids=lambda f: f.__name__)
def test_hermod_answers_as_classic_does(scenario, classic_port, hermod_port):
    classic = scenario(classic_port, "c")
    hermod = scenario(hermod_port, "c")
    assert hermod == classic
