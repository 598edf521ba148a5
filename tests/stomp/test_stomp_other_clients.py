"""STOMP clients from other languages: @stomp/stompjs (the browser client, npm) over WebSocket
with Node's `ws`, and Debian's ruby-stomp over TCP, against one broker; messages cross between
them and stomp.py. Installed by `make stomp-deps` (part of `make test`)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from stomp_clients import Raw, connect

ROOT = Path(__file__).resolve().parents[2]
STOMPJS = ROOT / "interop" / "stompjs"
RUBY = ROOT / "interop" / "ruby" / "roundtrip.rb"

CONFIG = """
[[listener]]
name = "web"
host = "127.0.0.1"
port = 0
websocket = true
"""


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config=CONFIG)


def ws_url(broker) -> str:
    line = next(l for l in broker.stdout_lines if l.startswith("hermod listener web on "))
    return "ws://" + line.split("://", 1)[1].strip() + "/"


def run(argv: list[str], cwd: Path | None = None) -> dict:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    assert lines, f"no result (exit {done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}"
    return json.loads(lines[-1])


def test_stompjs_over_websocket(broker):
    if not (STOMPJS / "node_modules" / "@stomp" / "stompjs").is_dir():
        pytest.fail("@stomp/stompjs is not installed: run `make stomp-deps`")
    result = run(["node", "roundtrip.js", ws_url(broker), "/queue/from.js", "3"], cwd=STOMPJS)
    assert result.get("version") == "1.2", result
    assert [m["body"] for m in result["received"]] == [f"from stompjs {i}" for i in range(3)]
    # (a backslash is left out: stompjs's own unescaping reads `\\c` as `\` + `\c`)
    assert all(m["note"] == "a:b\nc" and m["destination"] == "/queue/from.js" for m in result["received"]), result


def test_stompjs_meets_stomp_py_and_ruby(broker):
    conn, listener = connect(broker, "1.1")
    conn.subscribe("/topic/meeting", id="py", ack="auto")
    # stompjs subscribes to its own queue; a topic message from it reaches stomp.py
    result = run(["node", "roundtrip.js", ws_url(broker), "/topic/meeting", "2"], cwd=STOMPJS)
    assert [m["body"] for m in result["received"]] == ["from stompjs 0", "from stompjs 1"]
    got = listener.wait_messages(2)
    assert [m.body for m in got] == ["from stompjs 0", "from stompjs 1"]
    conn.disconnect()


def test_ruby_stomp_over_tcp(broker):
    if shutil.which("ruby") is None or not Path("/usr/lib/ruby/vendor_ruby/stomp.rb").exists():
        pytest.fail("ruby-stomp is not installed: run `make stomp-deps`")
    host, port = broker.address.rsplit(":", 1)
    result = run(["ruby", str(RUBY), host, port, "/queue/from.ruby", "3"])
    assert result["version"] == "1.2"
    assert result["receipts"] == ["r0", "r1", "r2"]
    assert [m["body"] for m in result["received"]] == [f"from ruby {i}" for i in range(3)]
    assert all(m["note"] == "a:b" for m in result["received"])
    # and a raw client sees what Ruby leaves for it
    raw = Raw(broker)
    raw.connect("1.2")
    raw.frame("SUBSCRIBE", [("destination", "/queue/from.ruby"), ("id", "s")])
    with pytest.raises(AssertionError):
        raw.next(timeout=0.3)  # Ruby acknowledged all three
