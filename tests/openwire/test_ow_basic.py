"""The ActiveMQ Classic JMS client (Debian's libactivemq-java 5.17.2) against Hermod: connect,
send, receive, acknowledge (slice 1 and 2 of the OpenWire adapter)."""
from __future__ import annotations

import pytest
from owclient import JmsError, OwClient


@pytest.fixture
def client_factory():
    made: list[OwClient] = []

    def make(broker, options: str = "") -> OwClient:
        port = int(broker.address.rsplit(":", 1)[1])
        c = OwClient(port, options)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_queue_send_and_receive_persistent(start_broker, client_factory):
    b = start_broker()
    c = client_factory(b)
    c.connect()
    c("session", "s", "false", "auto")
    c("producer", "p", "s", "queue:orders", "persistent")
    c("send", "p", "text", "hello")
    c("consumer", "c", "s", "queue:orders")
    m = c.receive("c")
    assert m is not None
    assert (m["kind"], m["body"], m["mode"], m["redelivered"]) == ("text", "hello", "2", "false")
    assert m["dest"] == "queue:orders"
    assert c.receive("c", 200) is None
