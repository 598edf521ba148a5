"""`explain` runs the post office's routing as a dry run (`RoutingContext` with a trace): for a
ring of diverts (which the configuration refuses, but wildcard bindings made at run time can
close) it names the queues the real send fills, the dead-letter queue included, and changes
nothing: no queue made, no id taken, no divert counted, no turn moved."""
from __future__ import annotations

import pytest
from proton import Message as ProtonMessage

from hermod.broker.app import _annotate, _copy_heads
from hermod.broker.core.forwarding import Divert, Target
from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.management.explain import explain
from hermod.broker.protocol import codec


def _message(address: str) -> Message:
    data = ProtonMessage(body="m", properties={"k": "v"}).encode()
    return Message(data, codec.Envelope(data), address, None, "test", 0)


def _ring(spliced: bool) -> PostOffice:
    po = PostOffice(annotate=_annotate, copy_heads=_copy_heads if spliced else None)
    for name in ("ring.a", "ring.b"):
        po.create_queue(name, name, ANYCAST)
    po.create_queue("ring.a.audit", "ring.a", ANYCAST)
    po.add_divert(Divert(name="a-to-b", source="ring.a", targets=[Target("ring.b")]))
    po.add_divert(Divert(name="b-to-a", source="ring.b", targets=[Target("ring.a")]))
    return po


def _filled(po: PostOffice) -> set[str]:
    return {name for name, q in po.queues.items() if q.waiting()}


@pytest.mark.parametrize("spliced", [True, False], ids=["codec-heads", "annotate"])
def test_explain_of_a_ring_names_the_queues_the_send_fills_and_changes_nothing(spliced):
    po = _ring(spliced)
    ids = po.next_message_id()
    route = explain(po, [], _message("ring.a"), "ring.a", None)
    assert "DLQ" not in po.queues and [d.fired for d in po.diverts] == [0, 0]
    assert po.next_message_id() == ids + 1  # the dry run took no id
    assert [s["kind"] for s in route["steps"]].count("cycle") == 1
    [cycle] = [s for s in route["steps"] if s["kind"] == "cycle"]
    assert cycle["name"] == "ring.a" and "b-to-a" in cycle["detail"]
    message = _message("ring.a")
    po.post(po.route(message, "ring.a", None))
    assert set(route["queues"]) == _filled(po) == {"ring.a", "ring.b", "DLQ"}
    # a second send and a second answer: the same way (the pick among ring.a's two queues moved once)
    route = explain(po, [], _message("ring.a"), "ring.a", None)
    before = {name: len(q.waiting()) for name, q in po.queues.items()}
    po.post(po.route(_message("ring.a"), "ring.a", None))
    grown = {name for name, q in po.queues.items() if len(q.waiting()) > before[name]}
    assert set(route["queues"]) == grown == {"ring.a.audit", "ring.b", "DLQ"}
