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


def test_explain_of_a_new_address_names_the_wildcard_subscriptions_it_would_get():
    """A send to an address that does not exist yet creates it, and the wildcard subscriptions
    and diverts whose pattern matches are bound to it then: explain names them, makes nothing."""
    from hermod.broker.core.message import MULTICAST
    po = PostOffice(annotate=_annotate, copy_heads=_copy_heads)
    po.create_queue("all-news", "news.#", MULTICAST)
    po.create_queue("sport-archive", "sport-archive", ANYCAST)
    po.add_divert(Divert(name="sport", source="news.sport.*", targets=[Target("sport-archive")]))
    route = explain(po, [], _message("news.sport.uk"), "news.sport.uk", MULTICAST)
    assert "news.sport.uk" not in po.addresses and route["created"] is True
    assert [s["kind"] for s in route["steps"]].count("address") == 2  # the new one, the divert's target
    po.ensure_send_target("news.sport.uk", MULTICAST)  # as a producer's attach does
    po.post(po.route(_message("news.sport.uk"), "news.sport.uk", MULTICAST))
    assert set(route["queues"]) == _filled(po) == {"all-news", "sport-archive"}
