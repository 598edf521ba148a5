"""Every command type, in every version (9-12), loose and tight, with and without the cache and
stack traces, encodes and decodes back to what a peer of that version sees. Sequences of
commands share one writer and one reader, so cache slots are reused across commands."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openwire_samples import for_version, without_traces
from openwire_strategies import COMMANDS, instances

from hermod.broker.openwire import model as m
from hermod.broker.openwire.codec import OpenWireCodec, wire_format_info
from hermod.broker.openwire.engine import Marshaller
from hermod.broker.openwire.framing import FrameReader, frame

FORMATS = st.tuples(st.sampled_from(m.VERSIONS), st.booleans(), st.booleans(), st.booleans(),
                    st.sampled_from([0, 150, 1024]))


def roundtrip(commands, version, tight, cache, stack_trace, cache_size):
    writer = Marshaller(version, tight=tight, cache=cache, cache_size=cache_size, stack_trace=stack_trace)
    reader = Marshaller(version, tight=tight, cache=cache, cache_size=cache_size, stack_trace=stack_trace)
    stream = b"".join(frame(writer.encode(c)) for c in commands)
    frames = FrameReader(len(stream) + 1).feed(stream)
    assert len(frames) == len(commands)
    for command, body in zip(commands, frames):
        want = for_version(command, version)
        if not stack_trace:
            want = without_traces(want)
        assert reader.decode(body) == want


@pytest.mark.parametrize("cls", COMMANDS, ids=lambda c: c.__name__)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_command_roundtrips(cls, data):
    fmt = data.draw(FORMATS)
    commands = data.draw(st.lists(instances(cls), min_size=1, max_size=3))
    roundtrip(commands, *fmt)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=FORMATS, commands=st.lists(st.one_of([instances(c) for c in COMMANDS]), min_size=2, max_size=8))
def test_mixed_sequences_roundtrip_through_one_cache(fmt, commands):
    roundtrip(commands, *fmt)


def test_a_small_cache_reuses_its_slots_and_stays_consistent():
    """More distinct values than slots: the writer evicts the oldest, the reader follows."""
    writer = Marshaller(12, tight=True, cache=True, cache_size=120)
    reader = Marshaller(12, tight=True, cache=True, cache_size=120)
    for round_ in range(3):
        for i in range(500):
            c = m.ConsumerInfo(consumer_id=m.ConsumerId("c", 1, i % 300), destination=m.Queue(f"q{i % 7}"))
            assert reader.decode(writer.encode(c)) == c, (round_, i)
    assert len(writer._out_index) <= 120


def test_cached_values_travel_once():
    writer = Marshaller(12, tight=True, cache=True)
    first = writer.encode(m.ProducerInfo(producer_id=m.ProducerId("ID:a-very-long-connection-id", 1, 1),
                                         destination=m.Queue("orders")))
    again = writer.encode(m.ProducerInfo(producer_id=m.ProducerId("ID:a-very-long-connection-id", 1, 1),
                                         destination=m.Queue("orders")))
    assert b"a-very-long" in first and b"a-very-long" not in again
    assert len(again) < len(first) - 30


def test_the_codec_negotiates_and_switches_formats_mid_read():
    """The client's WireFormatInfo and its first tight, cached commands arrive in one read: the
    commands after the WireFormatInfo are decoded in the negotiated format."""
    broker = OpenWireCodec(max_command_size=1 << 20, preferred=wire_format_info(max_frame_size=1 << 20))
    client = OpenWireCodec(max_command_size=1 << 20, preferred=wire_format_info(version=10, cache_size=512))
    assert broker.feed(client.hello())[0].version == 10
    connection = m.ConnectionInfo(command_id=1, connection_id=m.ConnectionId("c1"), user_name="u")
    session = m.SessionInfo(command_id=2, session_id=m.SessionId("c1", 1))
    client_side = client.feed(broker.hello())
    assert isinstance(client_side[0], m.WireFormatInfo)
    fresh = OpenWireCodec(max_command_size=1 << 20)
    got = fresh.feed(client.hello() + client.encode(connection) + client.encode(session))
    assert got[1:] == [connection, session]
    n = fresh.negotiated
    assert n is not None and (n.version, n.tight, n.cache, n.cache_size) == (10, True, True, 512)
    assert client.negotiated is not None and client.negotiated.max_frame_size == 1 << 20


@pytest.mark.parametrize("cache", [False, True])
def test_a_premarshalled_message_reads_as_the_message_in_any_connection_and_at_any_redelivery(cache):
    """The broker marshals a message once for all its OpenWire consumers (engine.Premarshalled):
    nested in a MessageDispatch of a connection whose cache already holds other structures, at
    another redelivery counter, it must read back as the message itself."""
    msg = m.ActiveMQTextMessage(
        producer_id=m.ProducerId("ID:p-1", 1, 2), destination=m.Queue("orders"),
        message_id=m.MessageId(None, m.ProducerId("ID:p-1", 1, 2), 7, 99), persistent=True, priority=4,
        timestamp=1234567, arrival=55, content=b"\x00\x00\x00\x05hello", properties={"a": 1, "b": "x"})
    first_writer, first_reader = Marshaller(12, tight=True, cache=cache), Marshaller(12, tight=True, cache=cache)
    # The first connection's cache holds the message's producer id and destination already.
    first_reader.decode(first_writer.encode(m.MessageDispatch(consumer_id=m.ConsumerId("ID:c-1", 1, 1), message=msg)))
    pre = first_writer.premarshal(msg)
    other_writer, other_reader = Marshaller(12, tight=True, cache=cache), Marshaller(12, tight=True, cache=cache)
    for writer, reader in ((first_writer, first_reader), (other_writer, other_reader)):
        for counter in (0, 3, 0):
            dispatch = m.MessageDispatch(consumer_id=m.ConsumerId("ID:c-1", 1, 1), destination=m.Queue("orders"),
                                         message=pre.redelivered(counter), redelivery_counter=counter)
            got = reader.decode(writer.encode(dispatch))
            assert got.message == dataclasses.replace(msg, redelivery_counter=counter)
            assert got.consumer_id == m.ConsumerId("ID:c-1", 1, 1)
