"""/metrics, issue 33 item 4: a node name that survives a restart (`rabbitmq_identity_info`'s
`rabbitmq_node`, which the RabbitMQ dashboards join every panel on), Artemis's per-address
and broker memory gauges labelled as Artemis labels them. Parsed with prometheus_client."""
from __future__ import annotations

from proton import Message
from proton.utils import BlockingConnection
from prometheus_client.parser import text_string_to_metric_families

from ops_support import metrics_text

CONFIG = """
[server]
max_memory_mb = 64
[[address]]
name = "metered.multi"
routing = ["multicast"]
  [[address.queue]]
  name = "metered.a"
  routing = "multicast"
  [[address.queue]]
  name = "metered.b"
  routing = "multicast"
"""


def series(broker) -> dict:
    """{sample name: {labels as a sorted tuple: value}}."""
    out: dict = {}
    for family in text_string_to_metric_families(metrics_text(broker)):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def by_address(samples: dict, name: str) -> dict:
    found = {}
    for labels, value in samples[name].items():
        labels = dict(labels)
        assert set(labels) == {"broker", "address"}, labels
        found[labels["address"]] = value
    return found


def test_per_address_and_memory_gauges(start_broker):
    b = start_broker(config=CONFIG)
    conn = BlockingConnection(b.url, timeout=10)
    try:
        sender = conn.create_sender("metered.multi")
        for _ in range(3):
            sender.send(Message(body="x" * 1000))
        conn.create_sender("metered.one").send(Message(body="y" * 500))
    finally:
        conn.close()
    s = series(b)
    size = by_address(s, "artemis_address_size")
    assert size["metered.multi"] >= 3 * 1000 and size["metered.one"] >= 500
    assert by_address(s, "hermod_address_messages")["metered.multi"] == 6  # 3 messages x 2 queues
    assert by_address(s, "hermod_address_messages_added") == {**by_address(s, "hermod_address_messages_added"),
                                                             "metered.multi": 6, "metered.one": 1}
    [(labels, usage)] = s["artemis_address_memory_usage"].items()
    assert dict(labels) == {"broker": "hermod"} and usage >= 3500
    [(labels, percentage)] = s["artemis_address_memory_usage_percentage"].items()
    assert dict(labels) == {"broker": "hermod"} and 0 <= percentage < 100
    assert percentage == int(100 * usage / (64 * 1024 * 1024))
    assert list(s["artemis_active"].values()) == [1]


def test_the_node_name_survives_a_restart(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'node.db'}"
    first = start_broker(store=store)

    def node(broker) -> str:
        [labels] = series(broker)["rabbitmq_identity_info"]
        return dict(labels)["rabbitmq_node"]
    name = node(first)
    first.stop()
    again = start_broker(store=store)
    assert node(again) == name
    again.stop()
    other = node(start_broker(store=f"sqlite:///{tmp_path / 'other.db'}"))
    assert other != name and other.split("-")[0] == name.split("-")[0]  # same host, another broker
    named = start_broker(store=store, config='[ha]\nnode = "node-a"\n')
    assert node(named) == "node-a"
