"""Bad input, unlucky and hostile peers: only `OpenWireError` ever comes out of the codec, limits
are enforced before memory is committed, and partial input is kept across reads."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openwire_samples import expected_commands

from hermod.broker.openwire import bodies
from hermod.broker.openwire import model as m
from hermod.broker.openwire.codec import OpenWireCodec, wire_format_info
from hermod.broker.openwire.engine import Marshaller
from hermod.broker.openwire.errors import OpenWireError
from hermod.broker.openwire.framing import FrameReader, frame
from hermod.broker.openwire.values import BIG_STRING, marshal_map, unmarshal_map
from hermod.broker.openwire.wire import Writer

MIB = 1 << 20
FORMATS = [(v, t, c) for v in (9, 12) for t in (False, True) for c in (False, True)]


def sample_stream(version=12, tight=True, cache=True) -> list[bytes]:
    w = Marshaller(version, tight=tight, cache=cache, stack_trace=True)
    return [frame(w.encode(c)) for _, c in expected_commands()]


def peak_while(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# --- framing -----------------------------------------------------------------------------

def test_over_limit_size_prefix_is_refused_before_buffering():
    reader = FrameReader(16 * MIB)
    with pytest.raises(OpenWireError, match="over the limit"):
        reader.feed(struct.pack(">i", 16 * MIB + 1) + b"\x1c")
    assert reader.buffered() == 0


def test_over_limit_prefix_split_across_reads_is_refused_at_its_fourth_byte():
    reader = FrameReader(1000)
    assert reader.feed(b"\x00\x00") == []
    with pytest.raises(OpenWireError, match="over the limit"):
        reader.feed(b"\x10\x00")


@pytest.mark.parametrize("size", [0, -1, -(1 << 31)])
def test_empty_and_negative_sizes_are_refused(size):
    with pytest.raises(OpenWireError, match="not positive"):
        FrameReader(1000).feed(struct.pack(">i", size))


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 10**6), max_size=40))
def test_any_split_of_the_input_gives_the_same_commands(cuts):
    stream = b"".join(sample_stream(12, True, False))
    points = sorted({c % (len(stream) + 1) for c in cuts})
    reader = FrameReader(MIB)
    got = []
    for a, b in zip([0, *points], [*points, len(stream)]):
        got += [bytes(f) for f in reader.feed(stream[a:b])]
    assert got == [f[4:] for f in sample_stream(12, True, False)]
    assert reader.buffered() == 0


def test_byte_by_byte_input_is_kept_until_the_command_completes():
    data = sample_stream()[1]
    reader = FrameReader(MIB)
    for b in data[:-1]:
        assert reader.feed(bytes([b])) == []
    assert [bytes(f) for f in reader.feed(data[-1:])] == [data[4:]]


def test_a_large_command_in_small_reads_costs_memory_once():
    """An 8 MiB command fed in 64 KiB reads: memory stays near one copy of it (no
    re-concatenation per read), and the command comes out whole."""
    body = b"\x1c" + bytes(8 * MIB)
    data = frame(body)
    reader = FrameReader(16 * MIB)
    out = []

    def feed_all():
        for i in range(0, len(data), 65536):
            out.extend(reader.feed(data[i:i + 65536]))

    peak = peak_while(feed_all)
    assert len(out) == 1 and len(out[0]) == len(body)
    assert peak < 2.5 * len(body), peak


# --- decoding ----------------------------------------------------------------------------

def text_message_with_content_length(length: int, tight: bool) -> bytes:
    """A text message whose content claims `length` bytes but holds four."""
    w = Marshaller(12, tight=tight)
    body = w.encode(m.ActiveMQTextMessage(content=b"ABCD"))
    at = body.index(struct.pack(">i", 4) + b"ABCD")
    return body[:at] + struct.pack(">i", length) + body[at + 4:]


@pytest.mark.parametrize("tight", [False, True])
def test_a_16_mib_content_length_in_a_small_command_is_an_error_not_an_allocation(tight):
    body = text_message_with_content_length(16 * MIB, tight)
    reader = Marshaller(12, tight=tight)
    errors = []

    def decode():
        try:
            reader.decode(body)
        except OpenWireError as exc:
            errors.append(exc)

    assert peak_while(decode) < MIB
    assert errors and "ends before" in str(errors[0])


def test_a_16_mib_big_string_length_in_properties_is_an_error_not_an_allocation():
    w = Writer()
    w.i32(1)
    w.utf("p")
    w.u8(BIG_STRING)
    w.i32(16 * MIB)
    w.raw(b"short")
    errors = []

    def decode():
        try:
            unmarshal_map(bytes(w.buf))
        except OpenWireError as exc:
            errors.append(exc)

    assert peak_while(decode) < MIB
    assert errors


def test_a_huge_map_count_is_refused_at_once():
    data = struct.pack(">i", (1 << 31) - 1) + b"\x00\x01a\x00"
    with pytest.raises(OpenWireError, match="longer than its command"):
        unmarshal_map(data)


@pytest.mark.parametrize(("version", "tight", "cache"), FORMATS)
def test_unknown_and_misplaced_types_are_refused(version, tight, cache):
    reader = Marshaller(version, tight=tight, cache=cache)
    with pytest.raises(OpenWireError, match="unknown command type 200"):
        reader.decode(b"\xc8\x00\x00")
    with pytest.raises(OpenWireError, match="not a command"):
        reader.decode(Marshaller(version, tight=tight).encode(m.ConsumerId("c", 1, 1)))
    # a ConsumerId where ConsumerInfo's destination belongs
    w = Marshaller(version, tight=tight, cache=cache)
    info = m.ConsumerInfo(consumer_id=m.ConsumerId("c", 1, 1), destination=m.Queue("q"))
    body = w.encode(info)
    forged = body.replace(bytes([m.Queue.TYPE]), bytes([m.ConsumerId.TYPE]))
    with pytest.raises(OpenWireError):
        Marshaller(version, tight=tight, cache=cache).decode(forged)


def test_a_cache_reference_outside_the_negotiated_size_is_refused():
    w = Writer()
    w.u8(m.SessionInfo.TYPE)
    w.i32(1)
    w.boolean(False)
    w.boolean(False)  # not new: a reference
    w.i16(5000)
    with pytest.raises(OpenWireError, match="outside the negotiated cache size"):
        Marshaller(12, cache=True, cache_size=1024).decode(bytes(w.buf))


@pytest.mark.parametrize("tight", [False, True])
def test_nesting_too_deep_is_refused(tight):
    inner: m.DataStructure = m.ActiveMQMessage()
    for _ in range(40):
        inner = m.ActiveMQMessage(data_structure=inner)
    body = Marshaller(12, tight=tight).encode(inner)
    with pytest.raises(OpenWireError, match="too deep"):
        Marshaller(12, tight=tight).decode(body)


def test_exception_causes_too_deep_are_refused_both_ways():
    cause = None
    for i in range(40):
        cause = m.Throwable("X", str(i), (), cause)
    with pytest.raises(OpenWireError, match="too deep"):
        Marshaller(12, stack_trace=True).encode(m.ExceptionResponse(exception=cause))
    w = Writer()  # loose, by hand: 40 causes deep
    w.u8(m.ExceptionResponse.TYPE)
    w.i32(1)
    w.boolean(False)
    w.i32(1)
    for _ in range(40):
        w.boolean(True)  # a throwable
        w.boolean(True)
        w.utf("X")  # class name
        w.boolean(False)  # no message
        w.i16(0)  # no stack trace elements
    w.boolean(False)
    with pytest.raises(OpenWireError, match="too deep"):
        Marshaller(12, stack_trace=True).decode(bytes(w.buf))


def test_trailing_bytes_are_refused():
    body = Marshaller(12).encode(m.KeepAliveInfo())
    with pytest.raises(OpenWireError, match="after the end"):
        Marshaller(12).decode(body + b"\x00")


def test_a_bad_magic_and_an_old_version_are_refused_at_negotiation():
    codec = OpenWireCodec(max_command_size=MIB)
    bad = Marshaller(12).encode(m.WireFormatInfo(b"ActiveMX", 12, {}))
    with pytest.raises(OpenWireError, match="magic"):
        codec.feed(frame(bad))
    old = Marshaller(12).encode(wire_format_info(version=6))
    with pytest.raises(OpenWireError, match="version 6 is not supported"):
        OpenWireCodec(max_command_size=MIB).feed(frame(old))


def test_strings_too_long_for_the_wire_are_refused_when_encoding():
    with pytest.raises(OpenWireError, match="too long for the tight encoding"):
        Marshaller(12, tight=True).encode(m.ControlCommand(command="x" * 40000))
    with pytest.raises(OpenWireError, match="too long for writeUTF"):
        Marshaller(12).encode(m.ControlCommand(command="\u20ac" * 30000))
    with pytest.raises(OpenWireError):
        Marshaller(12).encode(m.Response(correlation_id=1 << 40))


def test_a_compressed_body_cannot_expand_past_the_limit():
    bomb = zlib.compress(struct.pack(">i", 64 * MIB) + bytes(64 * MIB))
    assert len(bomb) < 100 * 1024
    with pytest.raises(OpenWireError, match="expands past"):
        bodies.decode_text(bomb, compressed=True, limit=MIB)
    claim = struct.pack(">i", 64 * MIB) + zlib.compress(bytes(10))
    with pytest.raises(OpenWireError):
        bodies.decode_bytes(claim, compressed=True, limit=MIB)
    assert bodies.decode_bytes(bodies.encode_bytes(b"abc" * 100, compressed=True), compressed=True) == b"abc" * 100


def test_property_maps_roundtrip_and_reject_non_primitives():
    assert unmarshal_map(marshal_map({"a": [1, {"b": None}]})) == {"a": [1, {"b": None}]}
    with pytest.raises(OpenWireError, match="not an OpenWire primitive"):
        marshal_map({"a": object()})


# --- fuzz --------------------------------------------------------------------------------

def decode_only_openwire_errors(reader: Marshaller, body: bytes) -> None:
    try:
        reader.decode(body)
    except OpenWireError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), body=st.binary(max_size=300))
def test_random_bodies_raise_only_openwire_errors(fmt, body):
    version, tight, cache = fmt
    decode_only_openwire_errors(Marshaller(version, tight=tight, cache=cache, stack_trace=True), body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), data=st.data())
def test_mutated_commands_raise_only_openwire_errors(fmt, data):
    """Valid commands with bytes flipped, cut or inserted, decoded in sequence (the cache state
    carrying over): either a command or an OpenWireError, and memory stays small."""
    version, tight, cache = fmt
    frames = sample_stream(version, tight, cache)
    index = data.draw(st.integers(0, len(frames) - 1))
    body = bytearray(frames[index][4:])
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(body)))
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and at < len(body):
            body[at] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del body[at:at + data.draw(st.integers(1, 8))]
        else:
            body[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    reader = Marshaller(version, tight=tight, cache=cache, stack_trace=True)
    for earlier in frames[:index]:
        reader.decode(earlier[4:])
    tracemalloc.start()
    try:
        decode_only_openwire_errors(reader, bytes(body))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.binary(max_size=64), max_size=8))
def test_random_streams_into_the_codec_raise_only_openwire_errors(chunks):
    codec = OpenWireCodec(max_command_size=64 * 1024)
    try:
        for chunk in [OpenWireCodec(max_command_size=MIB).hello(), *chunks]:
            codec.feed(chunk)
    except OpenWireError:
        pass
    assert codec._frames.buffered() <= 64 * 1024 + 4


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200), compressed=st.booleans())
def test_random_bodies_raise_only_openwire_errors_in_body_decoders(data, compressed):
    for decoder in (bodies.decode_text, bodies.decode_bytes, bodies.decode_map_body,
                    bodies.decode_stream_body, bodies.decode_object_body):
        try:
            decoder(data, compressed, limit=MIB)
        except OpenWireError:
            pass
