"""broker/mapping/mqtt.py as values: the prebuilt fast paths give what the general mapping
gives, properties go to their AMQP fields and come back, unrepresentable bodies become their
AMQP encoding with content type application/x-amqp-value."""
from __future__ import annotations

import pytest

from hermod.broker.mapping import mqtt as mapping
from hermod.broker.mapping.neutral import VALUE_BODY, NeutralMessage, TypedMap, decode_message, encode_message
from hermod.broker.mqtt.properties import EMPTY, Properties
from hermod.broker.protocol.amqptypes import decode


@pytest.mark.parametrize("qos", [0, 1, 2])
@pytest.mark.parametrize("retain", [False, True])
@pytest.mark.parametrize("payload", [b"", b"abc", b"x" * 300])
def test_fast_paths_match_the_general_mapping(qos, retain, payload):
    encoded = mapping.encode_publish(payload, qos, EMPTY, 0, retain)
    general = encode_message(mapping.to_neutral(payload, qos, EMPTY, 0, retain))
    assert decode_message(encoded) == decode_message(general)
    fast = mapping.from_encoded(encoded, 0)
    slow = mapping.from_neutral(decode_message(encoded), 0)
    assert (fast.payload, fast.qos, fast.properties) == (slow.payload, slow.qos, slow.properties) == (payload, qos, EMPTY)
    kept = decode_message(mapping.encode_kept(payload, qos, EMPTY, 0, "k", "a.b"))
    assert kept.durable and kept.properties == [("k", "string", "a.b")] and kept.body == payload


def test_properties_to_amqp_fields_and_back():
    props = Properties(payload_format_indicator=1, message_expiry_interval=10, content_type="text/plain",
                       response_topic="replies/d1", correlation_data=b"\x01",
                       user_properties=(("a", "1"), ("b", "2"), ("a", "3")))
    m = decode_message(mapping.encode_publish("é".encode(), 1, props, 1_000, False))
    assert (m.body_kind, m.body, m.durable) == (VALUE_BODY, "é", True)
    assert (m.ttl, m.absolute_expiry_time) == (10_000, 11_000)
    assert (m.content_type, m.reply_to, m.correlation_id) == ("text/plain", "replies.d1", b"\x01")
    assert m.properties == [("a", "string", "3"), ("b", "string", "2")]  # the last value of a name
    out = mapping.from_neutral(m, 1_000)
    assert out.payload == "é".encode() and out.qos == 1 and out.expiration == 11_000
    assert out.properties.user_properties == (("a", "1"), ("b", "2"), ("a", "3"))  # order and repeats
    assert out.properties.response_topic == "replies/d1"


def test_unrepresentable_bodies_travel_as_amqp_values():
    out = mapping.from_neutral(NeutralMessage(body_kind=VALUE_BODY, body=TypedMap([("k", "string", "v")])), 0)
    assert out.properties.content_type == mapping.AMQP_VALUE_TYPE and decode(out.payload)[0] == {"k": "v"}
    out = mapping.from_neutral(NeutralMessage(body_kind=VALUE_BODY, body=[1, 2]), 0)
    assert decode(out.payload)[0] == [1, 2]
    out = mapping.from_neutral(NeutralMessage(durable=True, correlation_id="abc", body_kind=VALUE_BODY, body="t"), 0)
    assert (out.qos, out.properties.correlation_data, out.properties.payload_format_indicator) == (1, b"abc", 1)
