"""/metrics leftovers of issue 15: the delivery latency histogram, connections per listener, and
memory use against its limit. Parsed with prometheus_client's parser."""
from __future__ import annotations

import re
import time

from proton import Message
from proton.utils import BlockingConnection
from prometheus_client.parser import text_string_to_metric_families

from hermod_testing import wait_for
from ops_support import metrics_text

LATENCY = "hermod_delivery_latency_seconds"


def families(broker) -> dict:
    return {f.name: f for f in text_string_to_metric_families(metrics_text(broker))}


def samples(broker, name: str) -> dict:
    """{(sample name, labels as sorted tuple): value} of one family."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in families(broker)[name].samples}


def test_delivery_latency_histogram_counts_acknowledged_messages(start_broker):
    b = start_broker()
    conn = BlockingConnection(b.url, timeout=10)
    try:
        sender = conn.create_sender("timed")
        for i in range(3):
            sender.send(Message(body=str(i)))
        sent_done = time.monotonic()
        assert families(b)[LATENCY].type == "histogram"
        assert samples(b, LATENCY)[(f"{LATENCY}_count", ())] == 0  # nothing acknowledged yet
        receiver = conn.create_receiver("timed", credit=3)
        receive_start = time.monotonic()
        bodies = []
        for _ in range(3):
            bodies.append(receiver.receive(timeout=10).body)
            receiver.accept()
        assert bodies == ["0", "1", "2"]
    finally:
        conn.close()  # a clean close carries the acknowledgements
    got = wait_for(lambda: (s := samples(b, LATENCY))[(f"{LATENCY}_count", ())] == 3 and s,
                   message="three acknowledgements counted")
    buckets = sorted(((float(dict(labels)["le"]), v) for (name, labels), v in got.items()
                      if name == f"{LATENCY}_bucket"))
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1] == (float("inf"), 3)
    # Each message waited at least from when its send was settled to when the receive began.
    assert got[(f"{LATENCY}_sum", ())] >= 3 * (receive_start - sent_done) - 0.003


LISTENERS = """
[[listener]]
name = "second"
port = 0
"""


def test_connections_are_counted_per_listener(start_broker):
    b = start_broker(config=LISTENERS)
    second = next(re.search(r"hermod listener second on (amqp://\S+)", l).group(1)
                  for l in b.stdout_lines if "listener second" in l)
    held = [BlockingConnection(b.url, timeout=10), BlockingConnection(b.url, timeout=10),
            BlockingConnection(second, timeout=10)]
    try:
        def counts():
            s = samples(b, "hermod_connections")
            return {dict(labels)["listener"]: v for (_, labels), v in s.items()}
        assert wait_for(lambda: counts() == {"main": 2, "second": 1} and True, message="2 + 1 connections")
        held.pop().close()
        assert wait_for(lambda: counts() == {"main": 2, "second": 0} and True, message="second closed")
    finally:
        for c in held:
            c.close()


def test_memory_use_and_its_limit(start_broker):
    b = start_broker(config="[server]\nmax_memory_mb = 64\n")
    conn = BlockingConnection(b.url, timeout=10)
    try:
        conn.create_sender("held").send(Message(body="x" * 10_000))
    finally:
        conn.close()
    f = families(b)
    limit = f["hermod_memory_limit_bytes"].samples[0].value
    used = f["hermod_memory_used_bytes"].samples[0].value
    assert limit == 64 * 1024 * 1024 == f["rabbitmq_resident_memory_limit_bytes"].samples[0].value
    assert 10_000 <= used < limit


def test_memory_limit_is_shown_when_left_to_its_default(start_broker):
    limit = families(start_broker())["hermod_memory_limit_bytes"].samples[0].value
    assert limit > 0
