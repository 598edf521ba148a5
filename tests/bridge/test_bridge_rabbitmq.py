"""[[bridge]] from Hermod to RabbitMQ 3.10 (Debian's, with its AMQP 1.0 plugin), a private node
per module: forwarded with SASL PLAIN, read back from RabbitMQ over AMQP 1.0 in order, and a
RabbitMQ restart mid-traffic loses nothing."""
from __future__ import annotations

from collections import Counter

import pytest

from bridge_testing import bridge_row, bridged_queue_config, numbered, queue_row, read_all, send_all
from hermod.broker.bridge import WINDOW
from hermod_testing import wait_for
from rabbitmq import RabbitNode, missing

RABBIT_LOGIN = dict(user="guest", password="guest", allowed_mechs="PLAIN", allow_insecure_mechs=True)


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    why = missing()
    if why:
        pytest.skip(why)
    node = RabbitNode(tmp_path_factory.mktemp("rabbitmq")).start()
    yield node
    node.stop()


def _local(run_broker, rabbit, queue: str):
    # /queue/NAME: RabbitMQ 3.10 declares a durable queue NAME (the target is durable) and
    # routes through the default exchange; /amq/queue/NAME reads that queue back.
    config = bridged_queue_config(rabbit.url, address=f"/queue/{queue}", user="guest", password_env="RABBIT_PW")
    return run_broker("local", config, env={"RABBIT_PW": "guest"})


def test_forwards_to_a_rabbitmq_queue(run_broker, rabbit):
    local = _local(run_broker, rabbit, "bridged")
    assert send_all(local.url, "outbound", numbered(200)) == 200
    got = read_all(rabbit.url, "/amq/queue/bridged", 200, **RABBIT_LOGIN)
    assert [m.properties["n"] for m in got] == list(range(200))
    assert [m.body for m in got] == [f"body {n}" for n in range(200)]
    assert all(m.durable for m in got) and [m.id for m in got] == [f"m-{n}" for n in range(200)]
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="local queue drained")
    assert bridge_row(local.url)["forwarded"] == 200


def test_rabbitmq_restarted_mid_traffic_loses_nothing(run_broker, rabbit):
    local = _local(run_broker, rabbit, "restarted")
    total = 2000
    assert send_all(local.url, "outbound", numbered(total)) == total
    wait_for(lambda: bridge_row(local.url)["forwarded"] >= 200, timeout=30, message="some forwarded")
    rabbit.stop()
    wait_for(lambda: bridge_row(local.url)["state"] != "up", message="bridge down")
    rabbit.start()
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, timeout=90, message="backlog forwarded")
    got = read_all(rabbit.url, "/amq/queue/restarted", total, idle=1.0, **RABBIT_LOGIN)
    counts = Counter(m.properties["n"] for m in got)
    assert set(counts) == set(range(total))
    assert sum(c - 1 for c in counts.values()) <= WINDOW
