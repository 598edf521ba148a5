"""Hostile and unlucky input: every limit is checked as bytes arrive, only `StompError` ever comes
out of the parser, memory stays bounded, and how the bytes are split never changes the result."""

from __future__ import annotations

import os
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermod.broker.stomp import ALL_COMMANDS, HEARTBEAT, FrameParser, Limits, StompError, encode_frame

MIB = 1 << 20
SMALL = Limits(max_frame_size=MIB, max_header_line=8192, max_headers=100, max_command_line=32)


def peak_while(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def feed_expecting_error(parser: FrameParser, data: bytes, match: str, piece: int = 65536) -> None:
    with pytest.raises(StompError, match=match):
        for i in range(0, len(data), piece):
            parser.feed(data[i:i + piece])


def test_a_header_a_megabyte_long_is_refused_at_the_line_limit():
    p = FrameParser(SMALL, "1.2")
    data = b"SEND\ndestination:/queue/a\nx:" + b"y" * MIB + b"\n\n\x00"
    feed_expecting_error(p, data, "header line longer than 8192 bytes", piece=4096)
    assert p.buffered() <= 8192 + 4096


def test_100000_headers_are_refused_at_the_count_limit():
    p = FrameParser(SMALL, "1.2")
    data = b"SEND\n" + b"h:v\n" * 100_000 + b"\n\x00"
    feed_expecting_error(p, data, "more than 100 headers")


def test_a_frame_without_terminator_is_refused_at_the_frame_limit():
    p = FrameParser(SMALL, "1.2")
    p.feed(b"SEND\ndestination:/queue/a\n\n")
    feed_expecting_error(p, b"z" * (2 * MIB), "frame larger than the limit of 1048576 bytes")
    assert p.buffered() <= MIB + 65536


def test_content_length_over_the_limit_is_refused_before_the_body_arrives():
    p = FrameParser(SMALL, "1.2")
    with pytest.raises(StompError, match="frame larger than the limit"):
        p.feed(b"SEND\ndestination:/queue/a\ncontent-length:%d\n\n" % MIB)


def test_frame_exactly_at_the_limit_passes_one_byte_over_fails():
    head = b"SEND\ncontent-length:%07d\n\n"
    size = len(head % 0) + 1
    limits = Limits(max_frame_size=1000, max_header_line=100, max_headers=10, max_command_line=16)
    [frame] = FrameParser(limits).feed(head % (1000 - size) + b"b" * (1000 - size) + b"\x00")
    assert len(frame.body) == 1000 - size
    with pytest.raises(StompError, match="frame larger"):
        FrameParser(limits).feed(head % (1001 - size) + b"b" * (1001 - size) + b"\x00")
    with pytest.raises(StompError, match="frame larger"):  # without content-length, too
        FrameParser(limits).feed(b"SEND\n\n" + b"b" * 994 + b"\x00")


def test_a_long_command_line_is_refused_early():
    p = FrameParser(SMALL)
    with pytest.raises(StompError, match="command line longer than 32"):
        p.feed(b"S" * 40)


def test_non_utf8_header_bytes_are_an_error():
    with pytest.raises(StompError, match="not UTF-8"):
        FrameParser(SMALL, "1.2").feed(b"SEND\ndestination:/queue/\xff\xfe\n\n\x00")
    with pytest.raises(StompError, match="unknown command"):
        FrameParser(SMALL, "1.2").feed(b"SEN\xc3\x89\n\n\x00")


def test_body_longer_than_content_length_is_an_error():
    with pytest.raises(StompError, match="longer than its content-length"):
        FrameParser(SMALL, "1.2").feed(b"SEND\ndestination:/queue/a\ncontent-length:1\n\nab\x00")


GARBAGE = {"ff": lambda: b"\xff" * (10 * MIB), "random": lambda: os.urandom(10 * MIB),
           "beats-then-letters": lambda: b"\n" * 100 + b"A" * (10 * MIB),
           "endless-header": lambda: b"SEND\nh:" + b"v" * (10 * MIB),
           "endless-body": lambda: b"SEND\n\n" + b"v" * (10 * MIB)}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_ten_mib_of_garbage_keeps_the_buffer_under_the_limit(kind):
    garbage = GARBAGE[kind]()
    parser = FrameParser(SMALL)

    def feed():
        with pytest.raises(StompError):
            for i in range(0, len(garbage), 65536):
                parser.feed(garbage[i:i + 65536])

    assert peak_while(feed) < MIB * 5 // 4  # the buffer, with a bytearray's spare capacity
    assert parser.buffered() <= MIB + 1


def test_a_single_huge_feed_is_buffered_in_steps_not_whole():
    parser = FrameParser(SMALL)
    garbage = b"SEND\n\n" + b"g" * (10 * MIB)

    def feed():
        with pytest.raises(StompError, match="frame larger"):
            parser.feed(garbage)

    assert peak_while(feed) < MIB * 5 // 4


def test_heart_beat_flood_stays_bounded():
    parser = FrameParser(SMALL)
    flood = b"\r\n" * (5 * MIB)
    assert peak_while(lambda: parser.feed(flood)) < MIB
    assert parser.heartbeats == 5 * MIB and parser.buffered() == 0


# --- splitting never matters -------------------------------------------------------------------

frames_st = st.lists(
    st.tuples(st.sampled_from(["SEND", "MESSAGE", "ERROR", "ACK", "SUBSCRIBE"]),
              st.lists(st.tuples(st.text(min_size=1, max_size=8).filter(lambda s: s != "content-length"),
                                 st.text(max_size=12)), max_size=4),
              st.binary(max_size=64),
              st.sampled_from([b"", b"\n", b"\r\n\n"])),
    min_size=1, max_size=5)


def stream_of(frames, version="1.2") -> bytes:
    return b"".join(encode_frame(c, h, b, version) + eol for c, h, b, eol in frames)


def parse_split(data: bytes, cuts: list[int], version="1.2") -> list:
    parser = FrameParser(version=version, commands=ALL_COMMANDS)
    out = []
    last = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        out += parser.feed(data[last:cut])
        last = cut
    # heart-beats coalesce per feed; compare frames and the total count of EOLs
    return [f for f in out if f is not HEARTBEAT], parser.heartbeats


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=frames_st, version=st.sampled_from(["1.1", "1.2"]))
def test_byte_at_a_time_equals_whole(frames, version):
    data = stream_of(frames, version)
    whole = parse_split(data, [], version)
    assert len(whole[0]) == len(frames)
    assert parse_split(data, list(range(1, len(data))), version) == whole


@settings(max_examples=200, deadline=None)
@given(frames=frames_st, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10))
def test_any_split_equals_whole(frames, cuts):
    data = stream_of(frames)
    assert parse_split(data, [c for c in cuts if c < len(data)]) == parse_split(data, [])


# --- fuzzing: only StompError may come out ------------------------------------------------------

def fuzz_once(data: bytes, version, cuts) -> None:
    parser = FrameParser(Limits(max_frame_size=4096, max_header_line=256, max_headers=16, max_command_line=16),
                         version)
    last = 0
    try:
        for cut in sorted(set(c for c in cuts if c < len(data))) + [len(data)]:
            parser.feed(data[last:cut])
            last = cut
    except StompError:
        pass
    assert parser.buffered() <= 4096 + 4096


pieces = st.sampled_from([b"SEND", b"CONNECT", b"MESSAGE", b"\n", b"\r\n", b"\r", b":", b"\\", b"\\n", b"\\c",
                          b"\\r", b"\\t", b"\x00", b"content-length:", b"content-length:3", b"5", b"-", b"\xff",
                          b"\xc3\xa9", b"destination:/queue/a", b"x" * 300])


@settings(max_examples=600, deadline=None)
@given(parts=st.lists(st.one_of(pieces, st.binary(max_size=20)), max_size=40),
       version=st.sampled_from([None, "1.0", "1.1", "1.2"]),
       cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6))
def test_fuzz_structured(parts, version, cuts):
    fuzz_once(b"".join(parts), version, cuts)


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=600), version=st.sampled_from([None, "1.0", "1.1", "1.2"]))
def test_fuzz_random_bytes(data, version):
    fuzz_once(data, version, [])
    fuzz_once(b"SEND\n" + data, version, [3, 9])


# --- frames ahead of the bad bytes are not lost -------------------------------------------------

def test_frames_completed_before_an_error_come_with_it():
    p = FrameParser(SMALL, "1.2")
    good = b"SEND\ndestination:/queue/a\nreceipt:r1\n\nok\x00\n"
    with pytest.raises(StompError, match="unknown command") as e:
        p.feed(good + b"BOGUS\n\n\x00")
    frames = [f for f in e.value.frames if f is not HEARTBEAT]
    assert [(f.command, f.header("receipt"), f.body) for f in frames] == [("SEND", "r1", b"ok")]


def outcome(data: bytes, piece: int | None):
    parser = FrameParser(Limits(max_frame_size=2048, max_header_line=128, max_headers=8, max_command_line=16), "1.2")
    frames = []
    try:
        for i in range(0, len(data), piece or max(1, len(data))):
            frames += parser.feed(data[i:i + (piece or len(data))])
    except StompError as e:
        return [f for f in frames + e.frames if f is not HEARTBEAT], str(e)
    return [f for f in frames if f is not HEARTBEAT], None


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.one_of(pieces, st.binary(max_size=10)), max_size=30))
def test_byte_at_a_time_equals_whole_for_any_input(parts):
    data = b"".join(parts)
    assert outcome(data, 1) == outcome(data, None)
