"""The protocol-neutral message encodes to AMQP sections a real AMQP library reads field for
field (Proton's own Message), and decodes what Proton encodes, typed values included."""
from __future__ import annotations

import proton
import pytest
from proton import byte, short, symbol

from hermod.broker.mapping.neutral import (DATA_BODY, JMS_BYTES, JMS_MAP, JMS_STREAM, JMS_TEXT, SEQUENCE_BODY,
                                          VALUE_BODY, NeutralMessage, TypedMap, decode_message,
                                          encode_message, envelope_of, jms_type)
from hermod.broker.protocol.amqptypes import Byte, DecodeError


def _proton(encoded: bytes) -> proton.Message:
    m = proton.Message()
    m.decode(encoded)
    return m


def test_every_field_reaches_proton_with_its_type():
    m = NeutralMessage(durable=True, priority=7, ttl=5000, annotations={"x-opt-jms-msg-type": Byte(5)},
                       message_id="ID:abc", user_id=b"alice", to="orders", subject="Type1", reply_to="replies",
                       correlation_id="c-1", content_type="text/plain", creation_time=1_700_000_000_000,
                       absolute_expiry_time=1_700_000_060_000, group_id="g", group_sequence=3,
                       properties=[("s", "short", 5), ("name", "string", "x"), ("d", "double", 1.5),
                                   ("flag", "boolean", True), ("b", "byte", -2)],
                       body_kind=VALUE_BODY, body="hello")
    p = _proton(encode_message(m))
    assert (p.durable, p.priority, p.ttl) == (True, 7, 5.0)
    assert (p.id, p.user_id, p.address, p.subject, p.reply_to, p.correlation_id) == \
        ("ID:abc", b"alice", "orders", "Type1", "replies", "c-1")
    assert p.content_type == "text/plain" and p.group_id == "g" and p.group_sequence == 3
    assert p.creation_time == 1_700_000_000.0 and p.expiry_time == 1_700_000_060.0
    assert p.annotations == {symbol("x-opt-jms-msg-type"): byte(5)}
    assert type(p.properties["s"]) is short and p.properties["b"] == byte(-2)
    assert p.properties == {"s": 5, "name": "x", "d": 1.5, "flag": True, "b": -2}
    assert p.body == "hello"


def test_what_proton_encodes_decodes_typed():
    p = proton.Message(body={"k": short(1), "s": "v"}, properties={"i": short(3), "t": "x"}, durable=True,
                       id="m1", reply_to="r", content_type=symbol("application/json"))
    m = decode_message(p.encode())
    assert m.durable and m.message_id == "m1" and m.reply_to == "r" and m.content_type == "application/json"
    assert m.properties == [("i", "short", 3), ("t", "string", "x")]
    assert m.body_kind == VALUE_BODY and m.body == TypedMap([("k", "short", 1), ("s", "string", "v")])
    assert jms_type(m) == JMS_MAP


@pytest.mark.parametrize("body,kind,expected", [
    ("text", VALUE_BODY, JMS_TEXT), (b"\x00\xff", DATA_BODY, JMS_BYTES), ([1, "a"], SEQUENCE_BODY, JMS_STREAM)])
def test_bodies_round_trip_and_type_as_qpid_jms_does(body, kind, expected):
    m = decode_message(encode_message(NeutralMessage(body_kind=kind, body=body)))
    assert (m.body_kind, m.body, jms_type(m)) == (kind, body, expected)


def test_the_core_reads_the_header_it_needs():
    env = envelope_of(encode_message(NeutralMessage(durable=True, priority=9, ttl=100)))
    assert (env.durable, env.priority, env.ttl) == (True, 9, 100)


def test_bytes_that_are_not_sections_are_refused():
    with pytest.raises(DecodeError):
        decode_message(b"\x00\x53\x77\xa1\xff")
