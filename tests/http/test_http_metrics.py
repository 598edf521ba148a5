"""/metrics in the Prometheus text format, parsed with prometheus_client's parser."""
from __future__ import annotations

from proton import Message
from prometheus_client.parser import text_string_to_metric_families

from http_helpers import call, http_url, q, receive_all, send
from hermod_testing import wait_for
from proton.utils import BlockingConnection

# What the RabbitMQ-Overview Grafana dashboard (10991) queries that Hermod has the concept for.
OVERVIEW_NAMES = {
    "rabbitmq_identity_info", "rabbitmq_build_info", "rabbitmq_connections", "rabbitmq_channels",
    "rabbitmq_queues", "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked",
    "rabbitmq_global_consumers", "rabbitmq_global_publishers",
    "rabbitmq_global_messages_received_total", "rabbitmq_global_messages_routed_total",
    "rabbitmq_global_messages_delivered_total", "rabbitmq_global_messages_acknowledged_total",
    "rabbitmq_process_resident_memory_bytes", "rabbitmq_process_open_fds", "rabbitmq_process_max_fds",
}


def _samples(base: str) -> dict:
    status, text = call(base, "GET", "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _value(samples, name, **labels):
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_metrics_have_rabbitmq_and_artemis_names_with_their_labels(broker):
    base = http_url(broker)
    send(broker.url, "metered", *[Message(body=str(i)) for i in range(3)])
    send(broker.url, 'odd"name', Message(body="x"))
    samples = _samples(base)
    missing = {n for n in OVERVIEW_NAMES if n not in samples and n.removesuffix("_total") not in samples}
    assert not missing
    assert _value(samples, "rabbitmq_queue_messages_ready", vhost="/", queue="metered") == 3
    assert _value(samples, "rabbitmq_queue_messages_unacked", vhost="/", queue="metered") == 0
    assert _value(samples, "rabbitmq_queue_messages", vhost="/", queue="metered") == 3
    assert _value(samples, "rabbitmq_queue_consumers", vhost="/", queue="metered") == 0
    assert _value(samples, "artemis_message_count", address="metered", queue="metered") == 3
    assert _value(samples, "artemis_messages_added", address="metered", queue="metered") == 3
    assert _value(samples, "artemis_message_count", address='odd"name', queue='odd"name') == 1
    identity = samples["rabbitmq_identity_info"][0]
    assert identity.labels["rabbitmq_cluster"] and identity.labels["rabbitmq_node"]
    assert _value(samples, "hermod_memory_used_bytes") > 0
    assert "hermod_journal_depth" in samples and "hermod_connections" in samples


def test_metrics_follow_consumption(broker):
    base = http_url(broker)
    send(broker.url, "flow", *[Message(body=str(i)) for i in range(4)])
    from http_helpers import receive_all
    receive_all(broker.url, "flow", 1)
    samples = _samples(base)
    assert _value(samples, "artemis_messages_acknowledged", address="flow", queue="flow") == 1
    assert _value(samples, "rabbitmq_queue_messages_ready", vhost="/", queue="flow") == 3


def _global(base: str, name: str) -> float:
    return _value(_samples(base), name, protocol="amqp10")


def test_global_counters_never_go_down(broker):
    """Issue 33, finding 3: `delivered` fell 8 -> 3 when a consumer with 5 unsettled messages
    left, and `received` fell 200 -> 197 on a queue delete; Prometheus reads either as a restart."""
    base = http_url(broker)
    send(broker.url, "counted", *[Message(body=str(i)) for i in range(8)])
    send(broker.url, "counted.gone", *[Message(body=str(i)) for i in range(3)])
    conn = BlockingConnection(broker.url)
    try:
        receiver = conn.create_receiver("counted", credit=8)
        taken = [receiver.receive(timeout=10) for _ in range(8)]
        assert [m.body for m in taken] == [str(i) for i in range(8)]
        for _ in range(3):
            receiver.accept()
        delivered = _global(base, "rabbitmq_global_messages_delivered_total")
        assert delivered == 8
    finally:
        conn.close()  # 5 unsettled go back to the queue
    wait_for(lambda: _value(_samples(base), "rabbitmq_queue_messages_ready", vhost="/", queue="counted") == 5,
             message="the 5 unsettled messages back on the queue")
    assert _global(base, "rabbitmq_global_messages_delivered_total") == 8
    assert _global(base, "rabbitmq_global_messages_acknowledged_total") == 3
    received = _global(base, "rabbitmq_global_messages_received_total")
    assert received == 11
    status, _ = call(base, "DELETE", f"/api/queues/{q('counted.gone')}")
    assert status == 204
    assert _global(base, "rabbitmq_global_messages_received_total") == 11
    # Taking the 5 again counts 5 more deliveries (RabbitMQ counts redeliveries too).
    receive_all(broker.url, "counted", 5)
    assert _global(base, "rabbitmq_global_messages_delivered_total") == 13
