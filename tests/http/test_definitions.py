"""`hermod definitions export|import` against real brokers: a round trip onto a fresh broker gives
the same definitions, a second import changes nothing, conflicts and configuration the running
broker lacks are reported (exit 1), a malformed file is one line (exit 2)."""
from __future__ import annotations

import json
import subprocess
import sys

from http_helpers import call, http_url

CONFIG = """
[[address_settings]]
match = "app.#"
max_delivery_attempts = 3
dead_letter_address = "app.dlq"

[[address]]
name = "app.in"
  [[address.queue]]
  name = "app.in"

[[divert]]
name = "ny-divert"
address = "app.in"
forwarding_address = "app.ny"
filter = "office = 'New York'"
"""


def hermod(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=60, input=stdin)


def _make_runtime_objects(broker) -> None:
    """Addresses and queues made through management, with Artemis's queue attributes."""
    base = http_url(broker)
    assert call(base, "POST", "/api/addresses", {"name": "app.events", "routing_types": ["multicast"]})[0] == 201
    assert call(base, "POST", "/api/addresses", {"name": "app.ny", "routing_types": ["anycast"]})[0] == 201
    status, answer = call(base, "POST", "/api/queues", {
        "name": "app.audit", "address": "app.events", "routing_type": "multicast", "filter": "level > 2",
        "max_consumers": 1, "exclusive": True, "last_value_key": "sensor"})
    assert status == 201, answer
    assert call(base, "POST", "/api/queues", {"name": "app.ny", "address": "app.ny"})[0] == 201
    assert call(base, "POST", "/api/queues", {"name": "app.volatile", "durable": False})[0] == 201


def test_export_then_import_on_a_fresh_broker_gives_the_same_definitions(start_broker, tmp_path):
    first = start_broker("--http-port", "0", config=CONFIG)
    _make_runtime_objects(first)
    exported = tmp_path / "defs.json"
    r = hermod("definitions", "export", str(exported), "--url", first.url)
    assert r.returncode == 0, r.stderr
    document = json.loads(exported.read_text())
    audit = next(q for q in document["queues"] if q["name"] == "app.audit")
    assert audit == {"name": "app.audit", "address": "app.events", "routing_type": "multicast", "durable": True,
                     "filter": "level > 2", "max_consumers": 1, "exclusive": True, "last_value_key": "sensor"}
    assert [d["name"] for d in document["diverts"]] == ["ny-divert"]
    assert document["address_settings"] == [{"match": "app.#", "max_delivery_attempts": 3,
                                             "dead_letter_address": "app.dlq"}]

    fresh = start_broker("--http-port", "0", config=CONFIG)  # the same configuration file, no runtime objects
    r = hermod("definitions", "import", str(exported), "--url", fresh.url, "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert set(result["created"]) == {"address app.events", "address app.ny", "queue app.audit", "queue app.ny",
                                      "queue app.volatile", "address app.volatile"}
    assert result["conflicts"] == [] and "divert ny-divert" in result["unchanged"]
    again = json.loads(hermod("definitions", "export", "--url", fresh.url).stdout)
    assert again == document

    r = hermod("definitions", "import", str(exported), "--url", fresh.url, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["created"] == []  # idempotent
    assert json.loads(hermod("definitions", "export", "--url", fresh.url).stdout) == document


def test_conflicts_and_missing_configuration_are_reported_and_left_alone(start_broker, tmp_path):
    first = start_broker("--http-port", "0", config=CONFIG)
    _make_runtime_objects(first)
    exported = tmp_path / "defs.json"
    assert hermod("definitions", "export", str(exported), "--url", first.url).returncode == 0

    bare = start_broker("--http-port", "0")  # no divert, no settings; app.audit made otherwise
    base = http_url(bare)
    assert call(base, "POST", "/api/queues", {"name": "app.audit", "address": "app.events",
                                              "routing_type": "multicast"})[0] == 201
    r = hermod("definitions", "import", str(exported), "--url", bare.url)
    assert r.returncode == 1, (r.stdout, r.stderr)
    problems = r.stderr.strip().splitlines()
    assert all(line.startswith("hermod: conflict: ") for line in problems)
    assert any("queue app.audit: exists with another" in line and "filter" in line for line in problems)
    assert any("divert ny-divert: not in the running configuration" in line for line in problems)
    assert any("address settings app.#" in line for line in problems)
    assert "Traceback" not in r.stderr
    status, queue = call(base, "GET", "/api/queues/app.audit")
    assert status == 200 and queue["filter"] is None  # left as it was
    assert call(base, "GET", "/api/queues/app.ny")[0] == 200  # the rest was created


def test_a_malformed_file_is_refused_with_one_line(broker, tmp_path):
    cases = {
        "not-json.json": ("{not json", "not JSON"),
        "list.json": ("[1, 2]", "JSON object"),
        "unknown.json": (json.dumps({"exchanges": []}), "unknown key 'exchanges'"),
        "no-name.json": (json.dumps({"queues": [{"address": "a"}]}), "queues[0].name is required"),
        "bad-type.json": (json.dumps({"queues": [{"name": "q", "durable": "yes"}]}), "queues[0].durable"),
        "bad-selector.json": (json.dumps({"queues": [{"name": "q", "filter": "a = = 1"}]}), "queues[0].filter (q)"),
    }
    for name, (text, words) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        r = hermod("definitions", "import", str(path), "--url", broker.url)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and words in lines[0], (name, r.stderr)
        assert "Traceback" not in r.stderr
    r = hermod("definitions", "import", str(tmp_path / "missing.json"), "--url", broker.url)
    assert r.returncode == 2 and "missing.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert json.loads(hermod("definitions", "export", "--url", broker.url).stdout)["queues"] == []


def test_http_import_refuses_bad_documents_with_400_and_creates_nothing(start_broker):
    b = start_broker("--http-port", "0")
    base = http_url(b)
    for raw, words in ((b"[1, 2]", "JSON object"), (b"{", "not JSON"),
                       (json.dumps({"queues": "q"}).encode(), "'queues' must be a list"),
                       (json.dumps({"addresses": [{"name": "a", "routing_types": ["fanout"]}]}).encode(),
                        "addresses[0].routing_types"),
                       (json.dumps({"queues": [{"name": "q", "max_consumers": True}]}).encode(),
                        "queues[0].max_consumers")):
        status, answer = call(base, "POST", "/api/definitions", raw=raw)
        assert status == 400 and words in answer["error"], (raw, answer)
    assert call(base, "GET", "/api/definitions")[1]["queues"] == []
    status, answer = call(base, "POST", "/api/definitions", {"queues": [{"name": "made"}]})
    assert status == 200 and answer == {"created": ["queue made"], "unchanged": [], "conflicts": []}
