"""codec.annotated_copy, the divert / dead-letter copy path, with its shortcuts (cached string
entries, ints written directly, the original's annotations not read when none is kept): the
copies Proton decodes are what the slow path made, byte for byte where it matters."""
from __future__ import annotations

import proton
import pytest

from hermod.broker.protocol import codec
from hermod.broker.protocol.amqptypes import Symbol, encode


def copy_of(annotations: dict | None, extra: dict, drop=("x-opt-routing-type",)):
    message = proton.Message(body=b"x" * 300, address="fan", properties={"k": 1})
    if annotations is not None:
        message.annotations = annotations
    buf = message.encode()
    out, env = codec.annotated_copy(buf, codec.Envelope(buf), extra, drop=drop)
    decoded = proton.Message()
    decoded.decode(out)
    assert env.annotations == codec.Envelope(out).annotations  # the derived envelope is right
    return decoded


@pytest.mark.parametrize("original", [None, {"x-opt-routing-type": 1}, {"x-opt-ORIG-QUEUE": "old", "x-keep": "kept"}],
                         ids=["none", "all-dropped", "one-kept"])
def test_copy_carries_the_extra_annotations_and_keeps_only_the_others(original):
    extra = {"x-opt-ORIG-ADDRESS": "fan", "x-opt-ORIG-MESSAGE-ID": 123456, "x-opt-ORIG-QUEUE": "fan.d3"}
    got = copy_of(original, extra)
    expected = dict(extra)
    if original and "x-keep" in original:
        expected["x-keep"] = "kept"
    assert got.annotations == expected
    assert got.body == b"x" * 300 and got.properties == {"k": 1} and got.address == "fan"


@pytest.mark.parametrize("value", [0, -1, 255, 1 << 40, (1 << 63) - 1, -(1 << 63), "", "é" * 200, "a" * 300,
                                   Symbol("sym"), True, 2.5])
def test_entries_are_encoded_as_the_general_encoder_does(value):
    assert codec._encoded_entry("x-k", value) == codec._encoded_key("x-k") + encode(value)
    assert codec._encoded_entry("x-k", value) == codec._encoded_key("x-k") + encode(value)  # cached


def test_the_entry_cache_stays_bounded():
    for n in range(codec.MAX_CACHED_ENTRIES * 2 + 5):
        codec._encoded_entry("x-opt-ORIG-QUEUE", f"q{n}")
    assert len(codec._ENTRIES) <= codec.MAX_CACHED_ENTRIES
