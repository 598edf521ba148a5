"""Independent MQTT clients against Hermod: mqtt.js (npm; over TCP on the main port and over
WebSocket with subprotocol `mqtt` on a `websocket = true` listener) and Debian's
mosquitto_pub / mosquitto_sub, 3.1.1 and 5.0, crossing with paho. Installed by `make mqtt-deps`."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermod_testing import wait_for
from mqtt_clients import V5, V311, Client, host_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "http"))
from http_helpers import call, http_url  # noqa: E402

MQTTJS = Path(__file__).resolve().parents[2] / "interop" / "mqttjs"
WEB = 'name = "web"\nhost = "127.0.0.1"\nport = 0\nwebsocket = true\n'


def mqttjs(url: str, version: int, topic: str, count: int, qos: int) -> dict:
    if not (MQTTJS / "node_modules" / "mqtt").is_dir() or shutil.which("node") is None:
        pytest.skip("mqtt.js is not installed (make mqtt-deps)")
    out = subprocess.run(["node", str(MQTTJS / "pubsub.js"), url, str(version), topic, str(count), str(qos)],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(config=f"[[listener]]\n{WEB}")


def web_url(broker) -> str:
    line = next(line for line in broker.stdout_lines if line.startswith("hermod listener web on "))
    return line.split(" on ", 1)[1].strip()


@pytest.mark.parametrize("version", [4, 5])
def test_mqttjs_over_tcp(broker, version):
    host, port = host_port(broker)
    r = mqttjs(f"mqtt://{host}:{port}", version, f"js/tcp/{version}", 5, 1)
    assert r["error"] is None
    assert sorted(m["payload"] for m in r["messages"]) == [f"mqttjs-{i}" for i in range(5)]
    assert {m["qos"] for m in r["messages"]} == {1}
    if version == 5:
        assert sorted(m["user"]["seq"] for m in r["messages"]) == [str(i) for i in range(5)]


@pytest.mark.parametrize("version", [3, 4, 5])
def test_mqttjs_over_websocket(broker, version):
    url = web_url(broker).replace("amqp://", "ws://").replace("mqtt://", "ws://")
    r = mqttjs(f"{url}/mqtt", version, f"js/ws/{version}", 3, 2)
    assert r["error"] is None
    assert sorted(m["payload"] for m in r["messages"]) == [f"mqttjs-{i}" for i in range(3)]
    assert {m["qos"] for m in r["messages"]} == {2}


@pytest.mark.parametrize("version", [("mqttv311", V311), ("mqttv5", V5)], ids=["v311", "v5"])
def test_mosquitto_clients_cross_with_paho(broker, version):
    if shutil.which("mosquitto_pub") is None:
        pytest.skip("mosquitto-clients is not installed (make mqtt-deps)")
    name, paho_version = version
    host, port = host_port(broker)
    topic = f"mosq/{name}"
    sub = subprocess.Popen(["mosquitto_sub", "-h", host, "-p", str(port), "-V", name, "-t", topic, "-q", "1",
                            "-C", "3", "-W", "30", "-i", f"sub-{name}"], stdout=subprocess.PIPE, text=True)
    paho = Client(broker, paho_version)
    wait_for(lambda: any(c.get("container_id") == f"sub-{name}" for c in _connections(broker)),
             message="mosquitto_sub connected")
    paho.publish(topic, b"from-paho", qos=1)
    subprocess.run(["mosquitto_pub", "-h", host, "-p", str(port), "-V", name, "-t", topic, "-q", "1",
                    "-m", "from-mosquitto-1"], check=True, timeout=30)
    subprocess.run(["mosquitto_pub", "-h", host, "-p", str(port), "-V", name, "-t", topic, "-q", "2",
                    "-m", "from-mosquitto-2"], check=True, timeout=30)
    out, _ = sub.communicate(timeout=40)
    assert sorted(out.split()) == ["from-mosquitto-1", "from-mosquitto-2", "from-paho"]
    paho.close()


def _connections(broker) -> list[dict]:
    status, answer = call(http_url(broker), "GET", "/api/connections")
    assert status == 200, answer
    return answer if isinstance(answer, list) else answer.get("connections", [])
