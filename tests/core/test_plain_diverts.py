"""Plain diverts (no filter, no transformer, non-exclusive) fire in one pass with the codec's
shared copy heads (`forwarding.route_through`, the one divert path): each copy made inline, the cycle
cut, and the queues a target reached kept only while its bindings stay the same."""
from __future__ import annotations

from proton import Message as ProtonMessage

from hermod.broker.app import _annotate, _copy_heads
from hermod.broker.core.forwarding import Divert, Target
from hermod.broker.core.message import ANYCAST, Message
from hermod.broker.core.postoffice import PostOffice
from hermod.broker.protocol import codec


def _po() -> PostOffice:
    return PostOffice(annotate=_annotate, copy_heads=_copy_heads)


def _send(po: PostOffice, address: str, body: str) -> Message:
    data = ProtonMessage(body=body).encode()
    m = Message(data, codec.Envelope(data), address, None, "test", 0)
    po.post(po.route(m, address, None))
    return m


def _waiting(po: PostOffice, queue: str) -> list[ProtonMessage]:
    out = []
    for ref in po.queues[queue].waiting():
        m = ProtonMessage()
        m.decode(ref.message.encoded)
        out.append(m)
    return out


def _divert(name: str, source: str, target: str) -> Divert:
    return Divert(name=name, source=source, targets=[Target(target)])


def test_each_plain_divert_copy_names_its_divert_and_gets_its_own_id():
    po = _po()
    po.create_queue("src", "src", ANYCAST)
    for i in range(3):
        po.create_queue(f"dst{i}", f"dst{i}", ANYCAST)
        po.add_divert(_divert(f"d{i}", "src", f"dst{i}"))
    original = _send(po, "src", "m")
    ids = set()
    for i in range(3):
        [ref] = po.queues[f"dst{i}"].waiting()
        ids.add(ref.message.id)
        [copy] = _waiting(po, f"dst{i}")
        assert copy.body == "m"
        assert copy.annotations["x-opt-ORIG-QUEUE"] == f"d{i}"
        assert copy.annotations["x-opt-ORIG-ADDRESS"] == "src"
        assert copy.annotations["x-opt-ORIG-MESSAGE-ID"] == original.id
    assert len(ids) == 3 and original.id not in ids
    assert [d.fired for d in po.diverts] == [1, 1, 1]
    assert [m.body for m in _waiting(po, "src")] == ["m"]


def test_a_plain_ring_dead_letters_the_copy_that_would_close_it():
    po = _po()
    po.create_queue("ring.a", "ring.a", ANYCAST)
    po.create_queue("ring.b", "ring.b", ANYCAST)
    po.add_divert(_divert("a-to-b", "ring.a", "ring.b"))
    po.add_divert(_divert("b-to-a", "ring.b", "ring.a"))
    for _ in range(2):  # the second send goes the way the first one's copies went
        _send(po, "ring.a", "lap")
    assert [[m.body for m in _waiting(po, q)] for q in ("ring.a", "ring.b", "DLQ")] == [["lap"] * 2] * 3
    assert {m.annotations["x-opt-ORIG-QUEUE"] for m in _waiting(po, "DLQ")} == {"b-to-a"}


def test_a_target_queue_deleted_and_made_again_takes_the_next_copy():
    po = _po()
    po.create_queue("src", "src", ANYCAST)
    po.create_queue("dst", "dst", ANYCAST)
    po.add_divert(_divert("d", "src", "dst"))
    _send(po, "src", "1")
    po.delete_queue("dst")
    po.create_queue("dst", "dst", ANYCAST)
    _send(po, "src", "2")
    assert [m.body for m in _waiting(po, "dst")] == ["2"]
