"""Random packets with random MQTT 5 properties (hypothesis): encode, read back, equal, and the
bytes re-encode identically; the same packets without properties in 3.1 and 3.1.1."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hermod.broker.mqtt import (MQTT_3_1, MQTT_3_1_1, MQTT_5, Connect, PacketReader, Properties, Publish,
                                Subscribe, Subscription, Will, encode)
from hermod.broker.mqtt.properties import EMPTY

text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
topic = st.text(st.characters(blacklist_characters="\x00+#", blacklist_categories=("Cs",)), min_size=1,
                max_size=20)
u16 = st.integers(1, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)


def props_of(**values) -> Properties:
    return Properties(**values)


pairs = st.lists(st.tuples(text, text), max_size=4).map(tuple)

publish_props = st.builds(
    props_of, payload_format_indicator=st.none() | st.integers(0, 1), message_expiry_interval=st.none() | u32,
    content_type=st.none() | text, response_topic=st.none() | topic, correlation_data=st.none() | st.binary(max_size=8),
    topic_alias=st.none() | u16, user_properties=pairs,
    subscription_identifiers=st.lists(st.integers(1, 268_435_455), max_size=3).map(tuple))
connect_props = st.builds(
    props_of, session_expiry_interval=st.none() | u32, receive_maximum=st.none() | u16,
    maximum_packet_size=st.none() | st.integers(1, 0xFFFFFFFF), topic_alias_maximum=st.none() | st.integers(0, 0xFFFF),
    request_response_information=st.none() | st.integers(0, 1), authentication_method=st.none() | text,
    user_properties=pairs)
will_props = st.builds(props_of, will_delay_interval=st.none() | u32, content_type=st.none() | text,
                       user_properties=pairs)


def _back(packet, version, server=False):
    data = encode(packet, version)
    (got,) = PacketReader(1 << 20, None if server else version).feed(data)
    assert encode(got, version) == data
    return got


@settings(max_examples=150, deadline=None)
@given(topic, st.binary(max_size=300), st.integers(0, 2), st.booleans(), st.booleans(), u16, publish_props)
def test_publish(topic_name, payload, qos, retain, dup, packet_id, props):
    p = Publish(topic_name, payload, qos, retain, dup and qos > 0, packet_id if qos else None, props)
    assert _back(p, MQTT_5) == p
    for version in (MQTT_3_1, MQTT_3_1_1):
        plain = Publish(topic_name, payload, qos, retain, dup and qos > 0, packet_id if qos else None)
        assert _back(plain, version) == plain


@settings(max_examples=100, deadline=None)
@given(text, st.booleans(), st.integers(0, 0xFFFF), st.none() | text, st.none() | st.binary(max_size=8),
       st.none() | st.tuples(topic, st.binary(max_size=20), st.integers(0, 2), st.booleans(), will_props),
       connect_props)
def test_connect(client_id, clean, keep_alive, username, password, will, props):
    for version in (MQTT_3_1, MQTT_3_1_1, MQTT_5):
        five = version == MQTT_5
        if password is not None and username is None and not five:
            continue
        w = Will(will[0], will[1], will[2], will[3], will[4] if five else EMPTY) if will else None
        c = Connect(client_id, version, clean, keep_alive, username, password, w, props if five else EMPTY)
        assert _back(c, version, server=True) == c


@settings(max_examples=100, deadline=None)
@given(u16, st.lists(st.tuples(topic, st.integers(0, 2), st.booleans(), st.booleans(), st.integers(0, 2)),
                     min_size=1, max_size=20),
       st.none() | st.integers(1, 268_435_455), pairs)
def test_subscribe(packet_id, subs, sub_id, users):
    props = Properties(subscription_identifiers=(sub_id,) if sub_id else (), user_properties=users)
    s5 = Subscribe(packet_id, [Subscription(f"x{t}", q, nl, rap, rh) for t, q, nl, rap, rh in subs], props)
    assert _back(s5, MQTT_5) == s5
    s3 = Subscribe(packet_id, [Subscription(f"x{t}", q) for t, q, *_ in subs])
    assert _back(s3, MQTT_3_1_1) == s3
