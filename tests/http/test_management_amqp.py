"""The same operations over the AMQP endpoint `hermod.management` (JSON string answers)."""
from __future__ import annotations

import pytest
from proton import Message, Timeout
from proton.reactor import Selector
from proton.utils import BlockingConnection

from broker.tools.clients import ManagementCallError, management_call
from http_helpers import receive_all, send


def test_purge_browse_and_move_over_amqp(broker):
    send(broker.url, "a1", *[Message(body=f"m{i}", properties={"i": i}) for i in range(4)])
    send(broker.url, "a2", Message(body="there"))
    peek = management_call(broker.url, "queue.browse", args={"name": "a1", "limit": 2})
    assert [m["body"] for m in peek] == ["m0", "m1"]
    assert management_call(broker.url, "queue.purge", args={"name": "a1", "filter": "i = 0"}) == {"removed": 1}
    assert management_call(broker.url, "queue.move", args={"name": "a1", "to": "a2", "filter": "i = 3"}) == {"moved": 1}
    assert [m.body for m in receive_all(broker.url, "a2", 2)] == ["there", "m3"]
    route = management_call(broker.url, "explain", args={"address": "a1", "properties": {"i": 1}})
    assert route["queues"] == ["a1"] and route["created"] is False
    with pytest.raises(ManagementCallError) as e:
        management_call(broker.url, "queue.get", args={"name": "missing"})
    assert e.value.status == 404
    # the statistics operations answer as they always did
    rows = management_call(broker.url, "queue.stat")
    assert any(r["queue"] == "a1" and r["messages"] == 2 for r in rows)


def test_purge_takes_the_messages_a_selector_consumer_turned_down(broker):
    """A consumer whose selector matches nothing has looked at every message (the broker parks
    them); a purge still takes them all and the queue is empty."""
    send(broker.url, "pq", *[Message(body=f"m{i}", properties={"i": i}) for i in range(5)])
    conn = BlockingConnection(broker.url)
    try:
        receiver = conn.create_receiver("pq", credit=10, options=Selector("i = 99"))
        with pytest.raises(Timeout):  # a bound on a negative; it also sends the credit
            receiver.receive(timeout=0.3)
        assert management_call(broker.url, "queue.purge", args={"name": "pq"}) == {"removed": 5}
        rows = management_call(broker.url, "queue.stat")
        assert [r["messages"] for r in rows if r["queue"] == "pq"] == [0]
    finally:
        conn.close()
