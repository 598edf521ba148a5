"""The same operations over the AMQP endpoint `hermod.management` (JSON string answers)."""
from __future__ import annotations

import pytest
from proton import Message, Timeout
from proton.reactor import Selector
from proton.utils import BlockingConnection

from hermod.broker.tools.clients import ManagementCallError, management_call
from hermod_testing import wait_for
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


LONG = "n" * 1025  # one byte over the contract's 1,024-byte name limit


@pytest.mark.parametrize("operation, args", [
    ("queue.create", {"name": LONG}),
    ("queue.create", {"name": "short", "address": LONG}),
    ("queue.get", {"name": LONG}),
    ("queue.move", {"name": "a1", "to": LONG}),
    ("address.create", {"name": LONG}),
    ("message.send", {"address": LONG, "body": "b"}),
    ("explain", {"address": LONG}),
])
def test_an_over_long_name_argument_answers_400_naming_the_limit(broker, operation, args):
    send(broker.url, "a1", Message(body="stays"))
    with pytest.raises(ManagementCallError) as e:
        management_call(broker.url, operation, args=args)
    assert e.value.status == 400
    assert "1024 bytes" in str(e.value)
    names = {r["queue"] for r in management_call(broker.url, "queue.stat")}
    assert names == {"a1"}  # nothing was created, nothing moved
    assert [m.body for m in receive_all(broker.url, "a1", 1)] == ["stays"]


def test_an_over_long_reply_to_is_dropped_with_a_log_line(broker):
    conn = BlockingConnection(broker.url)
    conn.create_sender("hermod.management").send(
        Message(id="r1", reply_to="r" * 2000, properties={"operation": "address.list"}))
    conn.close()
    wait_for(lambda: any("reply_to" in line and "1024" in line for line in broker.stderr_lines))
    assert all(not a["name"].startswith("rrr") for a in management_call(broker.url, "address.list", args={}))
    assert all(not r["queue"].startswith("rrr") for r in management_call(broker.url, "queue.stat"))


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
