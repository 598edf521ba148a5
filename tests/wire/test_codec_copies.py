"""codec_edits.annotated_copy, the divert / dead-letter copy path, with its shortcuts (cached string
entries, ints written directly, the original's annotations not read when none is kept): the
copies Proton decodes are what the slow path made, byte for byte where it matters."""
from __future__ import annotations

import proton
import pytest

from hermod.broker.protocol import codec, codec_edits
from hermod.broker.protocol.amqptypes import Symbol, encode


def copy_of(annotations: dict | None, extra: dict, drop=("x-opt-routing-type",)):
    message = proton.Message(body=b"x" * 300, address="fan", properties={"k": 1})
    if annotations is not None:
        message.annotations = annotations
    buf = message.encode()
    out, env = codec_edits.annotated_copy(buf, codec.Envelope(buf), extra, drop=drop)
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
    assert codec_edits._encoded_entry("x-k", value) == codec_edits._encoded_key("x-k") + encode(value)
    assert codec_edits._encoded_entry("x-k", value) == codec_edits._encoded_key("x-k") + encode(value)  # cached


def test_the_entry_cache_stays_bounded():
    for n in range(codec_edits.MAX_CACHED_ENTRIES * 2 + 5):
        codec_edits._encoded_entry("x-opt-ORIG-QUEUE", f"q{n}")
    assert len(codec_edits._ENTRIES) <= codec_edits.MAX_CACHED_ENTRIES


def test_a_shared_body_copy_reads_as_the_whole_copy_and_a_copy_of_it_too():
    """app._annotate's divert copy shares the original's body: what it encodes to, its size and
    its properties are those of the copy annotated_copy writes out whole; so are a copy's."""
    from hermod.broker.app import _annotate
    from hermod.broker.core.message import Message, SharedBodyCopy

    pm = proton.Message(body=b"b" * 5000, address="fan", properties={"k": 1}, subject="s", ttl=60)
    pm.annotations = {"x-keep": "kept", "x-opt-routing-type": 1}
    buf = pm.encode()
    original = Message(buf, codec.Envelope(buf), "fan", None, "c", 7, 11)
    extra = {"x-opt-ORIG-ADDRESS": "fan", "x-opt-ORIG-MESSAGE-ID": 11, "x-opt-ORIG-QUEUE": "d1"}
    copy = _annotate(original, extra, "fan.copy")
    assert isinstance(copy, SharedBodyCopy) and copy.base is buf
    whole, env = codec_edits.annotated_copy(buf, codec.Envelope(buf), extra, drop=("x-opt-routing-type",))
    assert copy.encoded == whole and copy.size == len(whole)
    assert copy.properties["subject"] == "s" and copy.application_properties == {"k": 1}
    assert copy.annotations == env.annotations and copy.envelope.ttl == 60000
    second = _annotate(copy, {"x-opt-ORIG-QUEUE": "d2"}, "fan.copy2")
    assert second.base is buf
    decoded = proton.Message()
    decoded.decode(second.encoded)
    assert decoded.annotations == {"x-keep": "kept", "x-opt-ORIG-ADDRESS": "fan", "x-opt-ORIG-MESSAGE-ID": 11,
                                   "x-opt-ORIG-QUEUE": "d2"}
    assert decoded.body == b"b" * 5000 and decoded.subject == "s" and second.size == len(second.encoded)
    dead = _annotate(copy, {"x-opt-ORIG-QUEUE": "dlq"}, "DLQ", True)  # the ttl goes: written whole
    decoded.decode(dead.encoded)
    assert not isinstance(dead, SharedBodyCopy) and decoded.ttl == 0 and decoded.body == b"b" * 5000


def _with_header(fields: bytes, count: int, wide: bool) -> bytes:
    """A message whose header list is encoded as given (list8 or list32), then a data body."""
    if wide:
        header = b"\xd0" + (len(fields) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + fields
    else:
        header = b"\xc0" + bytes((len(fields) + 1, count)) + fields
    return b"\x00\x53\x70" + header + b"\x00\x53\x75\xa0\x03abc"


# durable true, priority 7 (ubyte), ttl 1000 (uint), first-acquirer false
_FIELDS = b"\x41" + b"\x50\x07" + b"\x70\x00\x00\x03\xe8" + b"\x42"


@pytest.mark.parametrize("wide", [False, True], ids=["list8", "list32"])
def test_header_fields_are_read_alike_the_first_time_and_from_the_cache(wide):
    buf = _with_header(_FIELDS, 4, wide)
    for _ in range(2):  # decoded, then taken from the header cache
        env = codec.Envelope(buf)
        assert (env.durable, env.priority, env.ttl, env.first_acquirer) == (True, 7, 1000, False)
    decoded = proton.Message()
    decoded.decode(buf)
    assert decoded.durable and decoded.priority == 7 and decoded.ttl == 1.0


def test_an_oversized_header_is_read_but_not_kept():
    """A header padded with 2,000 extra null fields (legal AMQP: a later version's fields)
    is read right, and not kept in the header cache: a client could otherwise pin big strings."""
    buf = _with_header(_FIELDS + b"\x40" * 2000, 4 + 2000, wide=True)
    codec._HEADERS.clear()
    env = codec.Envelope(buf)
    assert (env.durable, env.priority, env.ttl) == (True, 7, 1000)
    assert codec._HEADERS == {}
    small = _with_header(_FIELDS, 4, wide=False)
    codec.Envelope(small)
    assert list(codec._HEADERS.values()) == [(True, 7, 1000, False)]
