"""Malformed message bytes: the broker refuses them with `amqp:decode-error` or, when only the
contents of properties it decodes later are bad, passes them on as they came. Nothing a client
sends makes the codec raise anything but DecodeError, hang, or take the connection down.

The hypothesis tests mutate real encoded messages (bytes changed, cut short, inserted); the
inputs that once raised TypeError, IndexError, OverflowError or hung the broker (an array
claiming four billion empty elements) are kept as regression rows."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Delivery, Message

from hermod.broker.core.message import Message as CoreMessage
from hermod.broker.protocol import codec, codec_edits
from wire_helpers import Selector, connect, nothing_more, receive_bodies

SAMPLES = [
    Message(body="hello", properties={"a": 1, "s": "x", "f": 1.5, "l": [1, 2]}, subject="subj",
            id="id-1", group_id="g", group_sequence=3, durable=True, priority=7, ttl=1000,
            annotations={"x-opt-foo": "bar", "x-opt-delivery-delay": 5}, correlation_id="c",
            reply_to="r", user_id=b"u", content_type="text/plain", expiry_time=5000.0).encode(),
    Message(body=b"\x00" * 30, properties={"k": None, "m": {"x": 1}}).encode(),
    Message(body=["a", 1, {"b": 2}]).encode(),
]


def everything_the_broker_reads(data: bytes) -> None:
    """What the broker may do with an accepted message, on arrival and later."""
    envelope = codec.Envelope(data)  # on arrival: may raise DecodeError, nothing else
    message = CoreMessage(data, envelope, "a", None, arrival=1)
    # Later (selectors, groups, expiry, dead-letter copies): must not raise at all.
    message.properties, message.application_properties, message.priority
    message.group_id, message.group_sequence, message.expiration, message.scheduled_time
    codec_edits.with_delivery_count(data, envelope, 3)
    codec_edits.annotated_copy(data, envelope, {"x-opt-ORIG-ADDRESS": "a"}, drop=("x-opt-routing-type",),
                         clear_expiry=True)


def accepted_or_decode_error(data: bytes) -> None:
    try:
        codec.Envelope(data)
    except codec.DecodeError:
        return
    everything_the_broker_reads(data)


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SAMPLES)))
    kind = draw(st.sampled_from(["change", "cut", "insert"]))
    if kind == "change":
        for _ in range(draw(st.integers(1, 3))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif kind == "cut":
        del data[draw(st.integers(0, len(data) - 1)):]
    else:
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_messages_are_refused_cleanly_or_handled(data):
    accepted_or_decode_error(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_are_refused_cleanly_or_handled(data):
    accepted_or_decode_error(data)


def _nested_lists(depth: int) -> bytes:
    value = b"\x45"
    for _ in range(depth):
        value = b"\xd0" + struct.pack(">II", len(value) + 4, 1) + value
    return value


def _map_section(code: int, key: bytes, value: bytes) -> bytes:
    entry = b"\xa3" + bytes((len(key),)) + key + value
    return b"\x00\x53" + bytes((code,)) + b"\xd1" + struct.pack(">II", len(entry) + 4, 2) + entry


BODY = b"\x00\x53\x77\xa1\x02hi"
EMPTY_ARRAY_BOMB = b"\xf0" + struct.pack(">II", 9, 0xFFFFFFFF) + b"\x40"  # 4 billion nulls in 9 bytes


@pytest.mark.parametrize("data, refused", [
    (_map_section(0x72, b"x-a", EMPTY_ARRAY_BOMB) + BODY, True),
    (_map_section(0x72, b"x-a", _nested_lists(5000)) + BODY, True),
    (b"\x00\x53\x70\xa1\x01x" + BODY, True),  # the header is not a list
    # Header fields of the wrong type read as absent (contract: the message passes as sent).
    (b"\x00\x53\x70\xc0\x04\x02\x41\xa1\x01x" + BODY, True),  # list size does not match
    (b"\x00\x53\x70\xc0\x05\x02\x41\xa1\x01x" + BODY, False),  # header priority is a string
    (b"\x00\x53\x70\xc0\x04\x02\x41\x51\xff" + BODY, False),  # header priority is -1
    (b"\x00\x53\x73\xc0\x06\x01\x73\xff\xff\xff\xff" + BODY, False),  # properties: char out of range
    (_map_section(0x74, b"k", EMPTY_ARRAY_BOMB) + BODY, False),  # app properties, read later
    (_map_section(0x74, b"k", _nested_lists(5000)) + BODY, False),
])
def test_known_bad_inputs(data, refused):
    if refused:
        with pytest.raises(codec.DecodeError):
            codec.Envelope(data)
    else:
        everything_the_broker_reads(data)
        envelope = codec.Envelope(data)
        assert envelope.properties_of(data) == {} and envelope.application_properties_of(data) == {}
        assert (envelope.priority, envelope.ttl) == (4, 0)


# -- on the wire ----------------------------------------------------------------------------------
class Raw:
    """Bytes sent as a transfer's payload, as they are."""

    def __init__(self, data: bytes):
        self.data = data

    def send(self, sender, tag=None):
        delivery = sender.delivery(tag or sender.delivery_tag())
        sender.stream(self.data)
        sender.advance()
        return delivery


def test_a_malformed_transfer_is_rejected_with_decode_error_and_the_link_goes_on(broker):
    conn = connect(broker.url)
    sender = conn.create_sender("bad.input")
    bad = sender.send(Raw(b"\x00\x53\x70\xa1\x01x" + BODY), error_states=[])  # header not a list
    assert bad.remote_state == Delivery.REJECTED
    assert bad.remote.condition.name == "amqp:decode-error"
    garbage = sender.send(Raw(b"\xde\xad\xbe\xef" * 8), error_states=[])
    assert garbage.remote.condition.name == "amqp:decode-error"
    sender.send(Message(body="fine"))  # same link, same connection
    assert receive_bodies(conn.create_receiver("bad.input"), 1) == ["fine"]
    conn.close()


def test_undecodable_application_properties_reach_consumers_as_sent(broker):
    """A selector sees no properties in such a message; a plain consumer gets its bytes."""
    conn = connect(broker.url)
    selective = conn.create_receiver("bad.props", credit=5, options=Selector("k = 1"))
    sender = conn.create_sender("bad.props")
    sender.send(Raw(_map_section(0x74, b"k", EMPTY_ARRAY_BOMB) + BODY))
    sender.send(Message(body="next", properties={"k": 1}))
    assert receive_bodies(selective, 1) == ["next"]
    assert nothing_more(selective)
    selective.close()
    assert receive_bodies(conn.create_receiver("bad.props"), 1) == ["hi"]
    conn.close()
