"""Issue 28, finding 10: a WebSocket listener obeyed any web page. The contract ("HTTP", last
rule on Origin): an upgrade whose `Origin` is present and not in that listener's
`allowed_origins` (default: none) is answered 403; no `Origin` (a non-browser client) is accepted.
`[[listener]] allowed_origins` is taken from `[server]` when the listener does not set it."""
from __future__ import annotations

import subprocess
import sys

import proton
import pytest

from ws_client import WsRefused, WsSocket
from test_websocket import address_of, listener_url, round_trip, ws_listener

EVIL = "http://evil.example"


def upgrade(broker, origin: str | None, name: str = "web") -> WsSocket:
    headers = {"Origin": origin} if origin is not None else None
    return WsSocket.connect(address_of(listener_url(broker, name)), headers=headers)


def refused_status(broker, origin: str, name: str = "web") -> int:
    with pytest.raises(WsRefused) as refused:
        upgrade(broker, origin, name).close()
    return refused.value.status


def test_a_foreign_origin_is_refused_403_and_no_origin_is_served(start_broker):
    b = start_broker(config=ws_listener())
    assert refused_status(b, EVIL) == 403
    assert refused_status(b, "null") == 403  # a sandboxed page or a file: still a browser
    # The page got no AMQP connection: nothing was logged in from it.
    assert not any("evil" in line for line in b.stderr_lines if "logged in" in line)
    sock = upgrade(b, None)  # a program, not a browser: served
    round_trip(sock, "q.origin.none", "no origin")
    sock.close()


def test_listed_origins_are_served_and_others_refused(start_broker):
    allowed = 'allowed_origins = ["https://console.example:8443", "http://localhost:3000"]\n'
    b = start_broker(config=ws_listener() + allowed)
    for i, origin in enumerate(("https://console.example:8443", "HTTPS://Console.Example:8443",
                                "http://localhost:3000")):
        sock = upgrade(b, origin)
        round_trip(sock, f"q.origin.ok{i}", f"from {origin}")
        sock.close()
    # A neighbour of a listed origin is another origin: scheme, host and port all count.
    for origin in (EVIL, "http://console.example:8443", "https://console.example", "http://localhost:3001",
                   "https://console.example:8443.evil.example"):
        assert refused_status(b, origin) == 403, origin


def test_server_allowed_origins_is_the_default_of_every_listener(start_broker):
    config = ('[server]\nallowed_origins = ["https://app.example"]\n' + ws_listener("web")
              + ws_listener("strict") + "allowed_origins = []\n")
    b = start_broker(config=config)
    sock = upgrade(b, "https://app.example", "web")
    round_trip(sock, "q.origin.inherited", "inherited")
    sock.close()
    assert refused_status(b, "https://app.example", "strict") == 403
    assert refused_status(b, EVIL, "web") == 403


def test_a_refused_origin_leaves_the_listener_serving(start_broker):
    b = start_broker(config=ws_listener())
    for _ in range(20):
        assert refused_status(b, EVIL) == 403
    sock = upgrade(b, None)
    client = round_trip(sock, "q.origin.after", "after twenty refusals")
    assert client.conn.state & proton.Endpoint.REMOTE_ACTIVE
    sock.close()
    assert any("origin" in line.lower() and "evil.example" in line for line in b.stderr_lines)


@pytest.mark.parametrize("table, line, key", [
    ("server", 'allowed_origins = "https://a.example"', "server.allowed_origins"),
    ("server", 'allowed_origins = ["a.example"]', "server.allowed_origins"),
    ("server", 'allowed_origins = ["https://a.example/path"]', "server.allowed_origins"),
    ("listener", 'name = "w"\nwebsocket = true\nallowed_origins = [1]', "listener[0].allowed_origins"),
    ("listener", 'name = "w"\nwebsocket = true\nallowed_origin = ["https://a.example"]',
     "listener[0].allowed_origin"),
])
def test_a_bad_allowed_origins_is_one_line_and_exit_2(tmp_path, table, line, key):
    cfg = tmp_path / "bad.toml"
    header = "[[listener]]" if table == "listener" else f"[{table}]"
    cfg.write_text(f"{header}\n{line}\n")
    done = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and key in done.stderr, done.stderr
