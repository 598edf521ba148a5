"""codec_edits.annotated_copy, the divert / dead-letter copy path, with its shortcuts (cached string
entries, ints written directly, the original's annotations not read when none is kept): the
copies Proton decodes are what the slow path made, byte for byte where it matters."""
from __future__ import annotations

import weakref

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


# -- CopyHeads: one send's divert copies, encoded once and spliced ------------------------------------------------

_ORIG = {"x-opt-ORIG-ADDRESS": "fan", "x-opt-ORIG-MESSAGE-ID": 77, "x-opt-ORIG-QUEUE": "", "x-opt-ORIG-ROUTING-TYPE": 1}


def _envelope_fields(env: codec.Envelope) -> tuple:
    return tuple(getattr(env, name) for name in codec.Envelope.__slots__)


@pytest.mark.parametrize("original", [
    None, {"x-opt-routing-type": 1}, {"x-opt-ORIG-QUEUE": "old", "x-keep": "kept"},
    {"x-big": "v" * 400, "x-n": 3}, {f"x-k{i}": i for i in range(130)}],
    ids=["none", "all-dropped", "one-replaced-one-kept", "section-over-255-bytes", "over-255-entries"])
@pytest.mark.parametrize("value", ["d1", "", "q" * 300], ids=["short", "empty", "long"])
def test_copy_heads_are_the_heads_annotated_head_writes(original, value):
    """Byte for byte and envelope field for envelope field, whatever the original kept and
    whether the section needs the 32-bit map encoding (by the kept part or by the value)."""
    pm = proton.Message(body=b"x" * 300, address="fan", properties={"k": 1}, durable=True, ttl=5)
    if original is not None:
        pm.annotations = original
    buf = pm.encode()
    env = codec.Envelope(buf)
    drop = ("x-opt-routing-type",)
    heads = codec_edits.CopyHeads(buf, env, dict(_ORIG, **{"x-opt-ORIG-QUEUE": "first"}), "x-opt-ORIG-QUEUE", drop)
    head, copy_env = heads.head(value)
    want_head, want_env = codec_edits.annotated_head(buf, env, dict(_ORIG, **{"x-opt-ORIG-QUEUE": value}), drop)
    assert head == want_head
    assert _envelope_fields(copy_env) == _envelope_fields(want_env)
    assert list(copy_env.annotations) == list(want_env.annotations)  # the same order
    decoded = proton.Message()
    decoded.decode(head + buf[env.bare_at:])
    assert decoded.annotations["x-opt-ORIG-QUEUE"] == value and decoded.body == b"x" * 300


def test_copy_heads_envelopes_make_their_annotations_when_read_each_its_own():
    buf = proton.Message(body=b"x").encode()
    heads = codec_edits.CopyHeads(buf, codec.Envelope(buf), _ORIG, "x-opt-ORIG-QUEUE")
    first, second = heads.head("p")[1], heads.head("q")[1]
    assert isinstance(first, codec.Envelope)
    assert first.annotations["x-opt-ORIG-QUEUE"] == "p" and second.annotations["x-opt-ORIG-QUEUE"] == "q"
    assert first.annotations is first.annotations  # made once
    first.annotations["x-added"] = 1
    assert "x-added" not in second.annotations and "x-added" not in heads.head("r")[1].annotations
    second.annotations = None
    assert second.annotations is None


def test_copies_of_two_originals_that_differ_in_one_annotation_each_carry_their_own():
    """Each original gets its own heads: nothing of one original's is spliced into another's
    copies (they differ only in one kept annotation, and in nothing the copies set)."""
    drop = ("x-opt-routing-type",)
    out = []
    for kept in ("a", "b"):
        pm = proton.Message(body=b"same", address="fan")
        pm.annotations = {"x-keep": kept}
        buf = pm.encode()
        heads = codec_edits.CopyHeads(buf, codec.Envelope(buf), _ORIG, "x-opt-ORIG-QUEUE", drop)
        for via in ("d1", "d2"):
            head, env = heads.head(via)
            decoded = proton.Message()
            decoded.decode(head + buf[codec.Envelope(buf).bare_at:])
            out.append((decoded.annotations["x-keep"], decoded.annotations["x-opt-ORIG-QUEUE"], env.annotations["x-keep"]))
    assert out == [("a", "d1", "a"), ("a", "d2", "a"), ("b", "d1", "b"), ("b", "d2", "b")]


CHAIN = """
[[divert]]
name = "d1"
address = "a"
forwarding_address = "b"
[[divert]]
name = "d2"
address = "a"
forwarding_address = "c"
[[divert]]
name = "d3"
address = "b"
forwarding_address = "d"
[[address]]
name = "a"
routing = ["anycast"]
[[address.queue]]
name = "a"
routing = "anycast"
"""


def _routed(annotations: dict, config: str = CHAIN, recorded: list | None = None):
    """The broker's routing plan for a message to `a` with `annotations` (a real Broker with
    the codec's copy_heads, in process), as (queue names, decoded copy) per planned message."""
    import tomllib

    from hermod.broker import config as config_mod
    from hermod.broker.app import Broker
    from hermod.broker.core.message import Message

    broker = Broker(config_mod.parse(tomllib.loads(config)))
    broker.start()
    po = broker.postoffice
    if recorded is not None:
        made = po.copy_heads

        def recording(*args):
            heads = made(*args)
            recorded.append(weakref.ref(heads.__self__))
            return heads
        po.copy_heads = recording
    out = []
    for annotation_set in (annotations, dict(annotations, **{"x-keep": "other"})):
        pm = proton.Message(body=b"body", address="a", properties={"k": 1}, ttl=30)
        pm.annotations = annotation_set
        buf = pm.encode()
        plan = po.route(Message(buf, codec.Envelope(buf), "a", None, "c", 1_000), "a", None)
        for message, queues in plan:
            decoded = proton.Message()
            encoded = message.encoded
            decoded.decode(encoded)
            assert decoded.body == b"body"
            # what a copy took from its original (expiry, due time, size) is what its bytes say
            parsed = Message(encoded, codec.Envelope(encoded), "x", None, "c", 1_000)
            assert (message.expiration, message.scheduled_time, message.size) == (31_000, 0, len(encoded)) \
                == (parsed.expiration, parsed.scheduled_time, parsed.size)
            out.append(([q.name for q in queues], decoded.annotations))
        del plan
    return out


def test_a_send_through_a_divert_chain_gives_each_copy_its_own_original():
    """a diverts to b (d1) and c (d2); b diverts to d (d3): the copy of the copy is made while
    the send's diverts of `a` are still firing; each copy names its own original, and the second
    send (differing in one kept annotation) none of the first's."""
    got = _routed({"x-keep": "first"})
    by_queue = {tuple(queues): annotations for queues, annotations in got[:4]}
    d_copy, b_copy, c_copy = by_queue[("d",)], by_queue[("b",)], by_queue[("c",)]
    assert (b_copy["x-opt-ORIG-ADDRESS"], b_copy["x-opt-ORIG-QUEUE"], b_copy["x-keep"]) == ("a", "d1", "first")
    assert (c_copy["x-opt-ORIG-ADDRESS"], c_copy["x-opt-ORIG-QUEUE"], c_copy["x-keep"]) == ("a", "d2", "first")
    assert (d_copy["x-opt-ORIG-ADDRESS"], d_copy["x-opt-ORIG-QUEUE"], d_copy["x-keep"]) == ("b", "d3", "first")
    assert b_copy["x-opt-ORIG-MESSAGE-ID"] == c_copy["x-opt-ORIG-MESSAGE-ID"] != d_copy["x-opt-ORIG-MESSAGE-ID"]
    assert by_queue[("a",)] == {"x-keep": "first"}  # the original as it came
    second = {tuple(queues): annotations for queues, annotations in got[4:]}
    assert {q: a["x-keep"] for q, a in second.items()} == {("a",): "other", ("b",): "other", ("c",): "other",
                                                           ("d",): "other"}
    assert second[("b",)]["x-opt-ORIG-MESSAGE-ID"] != b_copy["x-opt-ORIG-MESSAGE-ID"]


def test_the_shared_heads_of_a_hostile_original_go_with_its_send():
    """An original with big annotations (64 entries of 1 KiB) diverted ten times: its copies'
    shared heads live for the send's routing only; nothing keeps them after it."""
    from hermod.broker.tools.perf import divert_config

    config = divert_config("a", 10) + '[[address]]\nname = "a"\nrouting = ["anycast"]\n' \
        '[[address.queue]]\nname = "a"\nrouting = "anycast"\n'
    recorded: list = []
    got = _routed({f"x-big{i}": "v" * 1024 for i in range(64)}, config, recorded)
    assert len(got) == 22
    assert all(sum(k.startswith("x-big") for k in a) == 64 for _q, a in got)
    assert len(recorded) == 2  # once per send, not once per copy
    assert [r() for r in recorded] == [None, None]


def test_a_shared_body_copy_given_whole_bytes_has_their_size():
    """`size` is kept on a shared-body copy (not summed at each enqueue and ack): a copy whose
    bytes are replaced (a transformer, the store) counts the new ones."""
    from hermod.broker.core.message import SharedBodyCopy

    buf = proton.Message(body=b"b" * 100).encode()
    env = codec.Envelope(buf)
    copy = SharedBodyCopy(b"", buf, 0, env, "a")
    assert copy.size == len(buf) == len(copy.encoded)
    copy.encoded = buf + b"\x00\x53\x78\x40"  # a footer more
    assert copy.size == len(buf) + 4 == len(copy.encoded)
