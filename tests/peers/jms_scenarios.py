"""The JMS comparison scenarios (java/JmsScenarios.java, on the stock ActiveMQ Classic 5.17
client) compiled once with plain javac and run against a broker URL; the transcript of each
scenario, and the transcripts ActiveMQ Classic 5.17.2 gave (tests/openwire/classic_transcripts/,
written by test_openwire_transcripts.py with HERMOD_WRITE_TRANSCRIPTS=1)."""
from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "JmsScenarios.java"
TRANSCRIPTS = HERE.parent / "openwire" / "classic_transcripts"
JARS = [Path("/usr/share/java") / j for j in (
    "activemq-client.jar", "geronimo-jms_1.1_spec.jar", "geronimo-j2ee-management-1.1-spec.jar", "hawtbuf.jar",
    "slf4j-api.jar", "slf4j-nop.jar")]


def missing() -> str | None:
    absent = [str(j) for j in JARS if not j.exists()]
    if absent or not shutil.which("javac"):
        return f"the JMS scenarios need `make openwire-java` (missing: {absent or 'javac'})"
    return None


@functools.cache
def classpath() -> str:
    out = Path(tempfile.mkdtemp(prefix="jms-scenarios-"))
    jars = ":".join(map(str, JARS))
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", jars, str(SOURCE)], check=True, capture_output=True,
                   text=True)
    return f"{out}:{jars}"


def names() -> list[str]:
    done = subprocess.run(["java", "-cp", classpath(), "JmsScenarios", "--list"], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.split()


def run(url: str, scenarios: list[str], timeout: float = 180) -> dict[str, list[str]]:
    """scenario -> its transcript lines (a scenario that threw ends with an `exception ...` line)."""
    done = subprocess.run(["java", "-cp", classpath(), "JmsScenarios", url, *scenarios], capture_output=True,
                          text=True, timeout=timeout)
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith("== "):
            current = out.setdefault(line[3:], [])
        else:
            current.append(line)
    if done.returncode != 0:
        raise RuntimeError(f"JmsScenarios exit {done.returncode}: {done.stderr[-800:]}")
    return out


def expected(scenario: str) -> list[str]:
    return (TRANSCRIPTS / f"{scenario}.txt").read_text().splitlines()


def write(transcripts: dict[str, list[str]]) -> None:
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    for name, lines in transcripts.items():
        (TRANSCRIPTS / f"{name}.txt").write_text("\n".join(lines) + "\n")
