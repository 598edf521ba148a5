"""`hermod replay`: retained messages of an address re-sent oldest first, in a time window,
through a selector, to the same or another address, with their routing type, header, properties,
application properties (types intact) and body."""
from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
from proton import Message, byte, int32, symbol, timestamp

from hermod.broker.replay import ReplayError, parse_time
from hermod_testing import ROOT
from spark_helpers import RETENTION, send_bodies
from wire_helpers import Caps, connect, nothing_more, receive_bodies, topic


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def hermod(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_times_are_iso_8601_and_utc_without_a_zone():
    assert parse_time("2026-05-01T12:00:00Z") == parse_time("2026-05-01T12:00:00") == 1777636800000
    assert parse_time("2026-05-01T14:00:00+02:00") == 1777636800000
    assert parse_time("2026-05-01T12:00:00.250Z") == 1777636800250
    with pytest.raises(ReplayError, match="invalid time"):
        parse_time("yesterday")


def test_replay_with_filter_and_to_address_resends_matching_messages_oldest_first(store_url, start_broker):
    b = start_broker(store=store_url, config=RETENTION)
    conn = connect(b.url)
    sender = conn.create_sender("pipe.orders")
    sender.send(Message(body="before the window", properties={"region": "EU"}))
    time.sleep(0.05)
    start = datetime.now(timezone.utc)
    for i in range(6):
        sender.send(Message(body=f"order {i}", id=f"id-{i}", subject="order", durable=True,
                            priority=6, properties={"region": "EU" if i % 2 == 0 else "US",
                                                    "n": int32(i), "b": byte(-i), "s": symbol("x")}))
    received = receive_bodies(conn.create_receiver("pipe.orders", name="take"), 7)  # consumed: replay still works
    assert len(received) == 7
    end = datetime.now(timezone.utc) + timedelta(seconds=1)
    replayed_receiver = conn.create_receiver("pipe.replayed")  # the target queue exists first

    result = hermod("replay", "--store", store_url, "--url", b.url, "--address", "pipe.orders",
                    "--from", iso(start), "--to", iso(end), "--filter", "region = 'EU'",
                    "--to-address", "pipe.replayed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "replayed 3 messages"

    messages = []
    for _ in range(3):
        messages.append(replayed_receiver.receive(timeout=10))
        replayed_receiver.accept()
    assert [m.body for m in messages] == ["order 0", "order 2", "order 4"]
    first = messages[0]
    assert (first.id, first.subject, first.durable, first.priority) == ("id-0", "order", True, 6)
    assert first.properties == {"region": "EU", "n": 0, "b": 0, "s": "x"}
    assert type(messages[1].properties["n"]).__name__ == "int32"
    assert type(messages[1].properties["b"]).__name__ == "byte"
    assert type(messages[1].properties["s"]).__name__ == "symbol"
    assert nothing_more(replayed_receiver)
    assert nothing_more(conn.create_receiver("pipe.orders", name="check"))  # nothing went back to the source
    conn.close()


def test_replay_to_the_same_address_keeps_the_multicast_routing_type(sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    conn = connect(b.url)
    subscriber = conn.create_receiver("pipe.news", name="subscriber", options=[topic()])
    conn.create_sender("pipe.news", options=[Caps("topic", on="target")]).send(
        Message(body="headline", properties={"t": timestamp(5)}))
    assert receive_bodies(subscriber, 1) == ["headline"]

    result = hermod("replay", "--store", sqlite_store, "--url", b.url, "--address", "pipe.news",
                    "--from", "2000-01-01T00:00:00", "--to", "2999-01-01T00:00:00")
    assert result.stdout.strip() == "replayed 1 messages", result.stderr
    again = subscriber.receive(timeout=10)
    subscriber.accept()
    assert again.body == "headline" and again.properties["t"] == timestamp(5)
    conn.close()


def test_replay_errors_are_one_line(sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    send_bodies(b.url, "pipe.e", ["x"])
    bad_filter = hermod("replay", "--store", sqlite_store, "--url", b.url, "--address", "pipe.e",
                        "--from", "2000-01-01", "--to", "2999-01-01", "--filter", "region = ")
    assert bad_filter.returncode == 2
    assert bad_filter.stderr.startswith("hermod: invalid filter") and bad_filter.stderr.count("\n") == 1
    bad_time = hermod("replay", "--store", sqlite_store, "--address", "pipe.e", "--from", "soon",
                      "--to", "2999-01-01")
    assert bad_time.returncode == 2 and "invalid time 'soon'" in bad_time.stderr
    memory = hermod("replay", "--address", "pipe.e", "--from", "2000-01-01", "--to", "2999-01-01",
                    "--store", "memory")
    assert memory.returncode == 2 and "database store" in memory.stderr
