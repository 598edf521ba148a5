"""The Java load generators (benchmarks/java/*.java) on the stock ActiveMQ Classic 5.17 client
jars from Debian (`make openwire-java`, `make activemq-deps` for activemq-stomp), compiled with
plain javac into benchmarks/build/java when a source is newer than its class, and run; their one
`result ...` line parsed into a dict."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "java"
CLASSES = HERE / "build" / "java"
JARS = [Path("/usr/share/java") / j for j in (
    "activemq-client.jar", "activemq-stomp.jar", "geronimo-jms_1.1_spec.jar",
    "geronimo-j2ee-management-1.1-spec.jar", "hawtbuf.jar", "slf4j-api.jar", "slf4j-nop.jar")]


def missing() -> str | None:
    """Why the Java load generators cannot run here, or None."""
    absent = [str(j) for j in JARS if not j.exists()]
    if absent:
        return f"missing {', '.join(absent)} (make openwire-java activemq-deps)"
    if not shutil.which("javac"):
        return "no javac (make openwire-java)"
    return None


def classpath() -> str:
    return ":".join([str(CLASSES), *map(str, JARS)])


def compile_all() -> None:
    why = missing()
    if why:
        raise RuntimeError(why)
    CLASSES.mkdir(parents=True, exist_ok=True)
    stale = [src for src in sorted(SOURCES.glob("*.java"))
             if not (CLASSES / f"{src.stem}.class").exists()
             or (CLASSES / f"{src.stem}.class").stat().st_mtime < src.stat().st_mtime]
    if stale:
        subprocess.run(["javac", "-nowarn", "-d", str(CLASSES), "-cp", classpath(), *map(str, stale)],
                       check=True, capture_output=True, text=True)


def parse_result(line: str) -> dict:
    out: dict = {}
    for m in re.finditer(r'(\w+)=("[^"]*"|\S+)', line):
        key, value = m.group(1), m.group(2)
        if value.startswith('"'):
            out[key] = value.strip('"')
            continue
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def run(main_class: str, args: list[str], timeout: float, heap: str = "256m") -> dict:
    """Run one load generator; its parsed result line (with `error` set when it failed or
    printed none)."""
    compile_all()
    cmd = ["java", f"-Xmx{heap}", "-cp", classpath(), main_class, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout: {main_class} ran over {timeout + 60:.0f} s"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("result ")), "")
    if not line:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-300:]
        return {"error": f"{main_class} printed no result (exit {proc.returncode}): {tail}"}
    return parse_result(line)
