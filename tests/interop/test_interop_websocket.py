"""rhea over WebSocket (container.websocket_connect with the `ws` package, interop/rhea/ws.js)
against a `[[listener]] websocket = true`: round trips at sizes across a 512-byte listener's frame
boundaries, SASL PLAIN over wss with a test CA, and anonymous refused when it is off."""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from interop_clients import RHEA, Tool, node, setup_component

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from certs import make_all  # noqa: E402

from hermod.broker.security.passwords import hash_password  # noqa: E402

ALICE_PW = "rhea-ws-pw"


@pytest.fixture
def rhea_ws(_clients) -> Tool:
    setup_component("rhea")
    return Tool("rhea ws.js", [node(), str(RHEA / "ws.js")], RHEA, _clients)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    return make_all(tmp_path_factory.mktemp("pki"))


def listener(max_frame_size: int, tls: bool = False) -> str:
    return (f'[[listener]]\nname = "web"\nhost = "127.0.0.1"\nport = 0\nwebsocket = true\n'
            f'max_frame_size = {max_frame_size}\ntls = {str(tls).lower()}\n')


def web_url(broker) -> str:
    line = next(l for l in broker.stdout_lines if l.startswith("hermod listener web on "))
    return line.split(" on ", 1)[1].strip()


def pattern_sha(n: int, size: int) -> str:
    """The sha256 of ws.js's body n of `size` bytes (byte i is (i + n) % 251)."""
    return hashlib.sha256(bytes((i + n) % 251 for i in range(size))).hexdigest()


def test_rhea_round_trip_across_frame_boundaries_on_a_512_byte_listener(start_broker, rhea_ws):
    b = start_broker(config=listener(512))
    frame = 512
    sizes = [0, 1, frame - 1, frame, frame + 1, 3 * frame + 7, 100_000, 1024 * 1024]
    r = rhea_ws.run(url=web_url(b) + "/amqp", address="q.rhea.ws", size=sizes, max_frame=frame,
                    timeout=60).ok()
    opened = [e for e in r.events if e["event"] == "open"]
    assert opened and opened[0]["max_frame_size"] == 512  # the listener's own value
    assert [(m["n"], m["size"], m["sha256"]) for m in r.messages] == \
        [(n, s, pattern_sha(n, s)) for n, s in enumerate(sizes)]
    assert r.summary == {"event": "summary", "sent": len(sizes), "received": len(sizes)}


def test_rhea_sasl_plain_over_wss_and_anonymous_refused(start_broker, rhea_ws, pki, monkeypatch):
    users = (f'[[security.user]]\nname = "alice"\npassword_hash = "{hash_password(ALICE_PW, iterations=64)}"\n'
             'roles = ["admin"]\n')
    b = start_broker(config=listener(4096, tls=True)
                     + f'[tls]\ncert = "{pki / "server.crt"}"\nkey = "{pki / "server.key"}"\n'
                     + "[security]\nanonymous = false\n" + users)
    url = web_url(b)
    assert url.startswith("wss://127.0.0.1:")
    monkeypatch.setenv("HERMOD_CA", str(pki / "ca.crt"))
    r = rhea_ws.run(url=url.replace("wss://", f"wss://alice:{ALICE_PW}@"), address="q.wss", size=[10, 5000]).ok()
    assert [m["sha256"] for m in r.messages] == [pattern_sha(0, 10), pattern_sha(1, 5000)]
    assert any("logged in as alice (PLAIN)" in line for line in b.stderr_lines)
    anonymous = rhea_ws.run(url=url, address="q.wss", size=[10])
    assert anonymous.rc == 2, anonymous.transcript()
    assert [e["condition"] for e in anonymous.errors] == ["amqp:unauthorized-access"], anonymous.transcript()
    assert not anonymous.messages
