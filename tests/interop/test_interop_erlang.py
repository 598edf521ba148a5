"""Erlang's amqp10_client (RabbitMQ's AMQP 1.0 client library, from Debian's rabbitmq-server package)
against Hermod: interop/erlang/amqp10_roundtrip.escript sends N messages, then receives them.

A smoke test, not the fidelity matrix: the library's message API (amqp10_msg) writes a data body,
string subject, application properties and the durable header, which is what is checked here.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from hermod_testing import BrokerProcess
from interop_clients import INTEROP, setup_component


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(["--port", "0", "--store", "memory"], tmp_path).start()
    yield b
    b.stop()


def test_erlang_amqp10_client_round_trip(broker):
    setup_component("erlang")
    host, port = broker.address.rsplit(":", 1)
    proc = subprocess.run(["escript", str(INTEROP / "erlang" / "amqp10_roundtrip.escript"), host, port,
                           "erlang.round-trip", "5"], capture_output=True, text=True, timeout=120)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert [(e["n"], e["state"]) for e in events if e["event"] == "settled"] == [(n, "accepted") for n in range(5)]
    messages = [e for e in events if e["event"] == "message"]
    assert [(m["body"], m["subject"], m["n_prop"], m["durable"]) for m in messages] == \
        [(f"message {n}", "erlang", n, True) for n in range(5)]
    assert events[-1] == {"event": "summary", "sent": 5, "accepted": 5, "received": 5}
