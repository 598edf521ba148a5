"""Divert copies of durable messages, made with the heads one send's copies share
(`codec_edits.CopyHeads`), are stored whole and come back after a SIGKILL and a restart with
the annotations each was made with: its own original's, its own divert's name. Both back-ends."""
from __future__ import annotations

from proton import Message

from durable_clients import body_of, queue_stats, receive_exactly, send_durable

CONFIG = """
[[divert]]
name = "dv-one"
address = "dv.src"
forwarding_address = "dv.one"

[[divert]]
name = "dv-two"
address = "dv.src"
forwarding_address = "dv.two"

[[divert]]
name = "dv-three"
address = "dv.two"
forwarding_address = "dv.three"

[[address]]
name = "dv.src"
routing = ["anycast"]
[[address.queue]]
name = "dv.src"
routing = "anycast"
"""


def _original(n: int) -> Message:
    m = Message(body=f"m{n}", durable=True, properties={"n": n})
    m.annotations = {"x-tag": "same", "x-which": f"w{n}"}  # the two differ in one annotation
    return m


def test_divert_copies_of_durable_messages_keep_their_annotations_across_a_restart(brokers):
    brokers.start(CONFIG)
    send_durable(brokers.url, "dv.src", [_original(0), _original(1)])
    brokers.kill()
    brokers.start(CONFIG)
    stats = queue_stats(brokers.url)
    assert {q: stats[q]["messages"] for q in ("dv.src", "dv.one", "dv.two", "dv.three")} == \
        {"dv.src": 2, "dv.one": 2, "dv.two": 2, "dv.three": 2}

    def seen(queue: str) -> list:
        return [(body_of(m), m.properties["n"], m.annotations["x-which"], m.annotations["x-tag"],
                 m.annotations["x-opt-ORIG-ADDRESS"], m.annotations["x-opt-ORIG-QUEUE"])
                for m in receive_exactly(brokers.url, queue, 2)]

    assert seen("dv.one") == [("m0", 0, "w0", "same", "dv.src", "dv-one"), ("m1", 1, "w1", "same", "dv.src", "dv-one")]
    assert seen("dv.two") == [("m0", 0, "w0", "same", "dv.src", "dv-two"), ("m1", 1, "w1", "same", "dv.src", "dv-two")]
    assert seen("dv.three") == [("m0", 0, "w0", "same", "dv.two", "dv-three"),
                                ("m1", 1, "w1", "same", "dv.two", "dv-three")]
    originals = receive_exactly(brokers.url, "dv.src", 2)
    assert [(body_of(m), dict(m.annotations)) for m in originals] == \
        [("m0", {"x-tag": "same", "x-which": "w0"}), ("m1", {"x-tag": "same", "x-which": "w1"})]
