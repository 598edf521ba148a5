"""Hostile and malformed input: every fault is an MqttError with the MQTT 5 reason code to
answer with, found as early as the bytes allow, with bounded memory."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermod.broker.mqtt import (MQTT_3_1_1, MQTT_5, Connect, MqttError, PacketReader, Properties, Publish,
                                Subscribe, Subscription, UnsupportedProtocol, encode, refusal_for_level)
from hermod.broker.mqtt.wire import string, u16, varint


def fails(data: bytes, version: int | None = MQTT_5, max_size: int = 1 << 20) -> MqttError:
    with pytest.raises(MqttError) as info:
        PacketReader(max_size, version).feed(data)
    return info.value


def test_a_fifth_remaining_length_byte_is_malformed_without_waiting():
    assert fails(b"\x30\xff\xff\xff\xff").reason_code == 0x81
    assert fails(b"\x30\x80\x80\x80\x80").reason_code == 0x81


def test_a_non_minimal_remaining_length_is_malformed_in_mqtt5():
    assert fails(b"\xc0\x80\x00").reason_code == 0x81  # PINGREQ, remaining length 0 in two bytes
    assert PacketReader(100, MQTT_3_1_1).feed(b"\xc0\x80\x00")  # 3.1.1 does not forbid it
    connect5 = encode(Connect("c", MQTT_5), MQTT_5)
    padded = connect5[:1] + bytes((connect5[1] | 0x80, 0)) + connect5[2:]
    assert fails(padded, None).reason_code == 0x81


def test_a_packet_over_the_maximum_is_refused_at_its_remaining_length_with_nothing_buffered():
    reader = PacketReader(1000, MQTT_5)
    with pytest.raises(MqttError) as info:
        reader.feed(b"\x30" + varint(268_435_455))  # only the header arrived
    assert info.value.reason_code == 0x95 and reader.buffered == 0
    with pytest.raises(MqttError):
        reader.feed(b"more")  # the reader stays failed
    exact = encode(Publish("t", b"x" * (1000 - 6)), MQTT_5)
    assert len(exact) == 1000 + 1 and fails(exact, max_size=1000).reason_code == 0x95
    assert PacketReader(1001, MQTT_5).feed(exact)


def test_good_packets_before_a_bad_one_are_handed_over_with_the_error():
    err = fails(encode(Publish("a", b"1"), MQTT_5) + b"\x00\x00")
    assert err.reason_code == 0x81 and [p.payload for p in err.packets] == [b"1"]


@pytest.mark.parametrize("first", [0x00, 0x11, 0x21, 0x41, 0x50 | 8, 0x60, 0x80, 0x83, 0x91, 0xA0, 0xB1, 0xC1,
                                   0xD2, 0xE4, 0xF1])
def test_reserved_flag_bits_and_packet_types_are_malformed(first):
    assert fails(bytes((first, 2, 0, 1))).reason_code == 0x81


def test_publish_flags():
    assert fails(b"\x36\x05\x00\x01a\x00\x01").reason_code == 0x81  # QoS 3
    assert fails(b"\x38\x04\x00\x01a\x00").reason_code == 0x81  # DUP at QoS 0
    assert fails(b"\x32\x05\x00\x01a\x00\x00").reason_code == 0x81  # packet id 0
    assert fails(b"\x30\x04\x00\x01+\x00").reason_code == 0x90  # wildcard in a name
    assert fails(b"\x30\x03\x00\x00\x00").reason_code == 0x82  # empty topic, no alias (5.0)
    assert fails(b"\x30\x02\x00\x00", MQTT_3_1_1).reason_code == 0x81


def test_connect_flags():
    base = string("MQTT") + b"\x04"
    assert fails(b"\x10" + varint(12) + base + b"\x03\x00\x3c" + string("c"), None).reason_code == 0x81
    assert fails(b"\x10" + varint(12) + base + b"\x18\x00\x3c" + string("c"), None).reason_code == 0x81  # will QoS 3
    assert fails(b"\x10" + varint(12) + base + b"\x20\x00\x3c" + string("c"), None).reason_code == 0x81
    assert fails(b"\x10" + varint(14) + base + b"\x40\x00\x3c" + string("c") + u16(0), None).reason_code == 0x81
    reader = PacketReader(100)
    reader.feed(encode(Connect("c"), MQTT_3_1_1))
    assert reader.version == MQTT_3_1_1
    with pytest.raises(MqttError) as info:
        reader.feed(encode(Connect("c"), MQTT_3_1_1))
    assert info.value.reason_code == 0x82  # a second CONNECT


@pytest.mark.parametrize("name,level,answer", [("MQTT", 6, "2003008400"), ("MQTT", 3, "20020001"),
                                               ("MQIsdp", 4, "20020001"), ("MQTT", 2, "20020001"),
                                               ("MQXX", 4, "20020001"), ("MQTT", 5, None)])
def test_a_protocol_level_the_broker_does_not_speak_gets_the_contracts_connack(name, level, answer):
    data = string(name) + bytes((level, 2)) + u16(60) + (b"\x00" if level == 5 else b"") + string("c")
    packet = b"\x10" + varint(len(data)) + data
    if answer is None:
        assert PacketReader(100).feed(packet)
        return
    with pytest.raises(UnsupportedProtocol) as info:
        PacketReader(100).feed(packet)
    assert info.value.connack.hex() == answer and info.value.reason_code == 0x84
    assert refusal_for_level(5 if level >= 5 else 4).hex() in ("2003008400", "20020001")


@pytest.mark.parametrize("raw", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"a\x00b", b"\xf4\x90\x80\x80"])
def test_bad_utf8_is_malformed(raw):
    assert fails(b"\x30" + varint(len(raw) + 3) + u16(len(raw)) + raw + b"\x00").reason_code == 0x81


def _publish_with_props(block: bytes) -> bytes:
    body = string("t") + varint(len(block)) + block
    return b"\x30" + varint(len(body)) + body


def test_properties():
    assert fails(_publish_with_props(b"\x02\x00\x00\x00\x01\x02\x00\x00\x00\x02")).reason_code == 0x82  # twice
    assert fails(_publish_with_props(b"\x11\x00\x00\x00\x01")).reason_code == 0x81  # not for PUBLISH
    assert fails(_publish_with_props(b"\x7f\x00")).reason_code == 0x81  # unknown identifier
    assert fails(_publish_with_props(b"\x01\x02")).reason_code == 0x82  # payload format 2
    assert fails(_publish_with_props(b"\x23\x00\x00")).reason_code == 0x94  # topic alias 0
    assert fails(_publish_with_props(b"\x02\x00\x00")).reason_code == 0x81  # runs past the block
    assert fails(_publish_with_props(b"\x26" + string("k") + b"\x00\x01\xff")).reason_code == 0x81
    pairs = b"\x26" + string("k") + string("1") + b"\x26" + string("k") + string("2")
    assert PacketReader(100, MQTT_5).feed(_publish_with_props(pairs))[0].properties.user_properties == (
        ("k", "1"), ("k", "2"))
    sub_ids = b"\x0b\x01\x0b\x02"
    assert PacketReader(100, MQTT_5).feed(_publish_with_props(sub_ids))[0].properties.subscription_identifiers \
        == (1, 2)
    sub = u16(1) + varint(4) + sub_ids + string("a") + b"\x00"
    assert fails(b"\x82" + varint(len(sub)) + sub).reason_code == 0x82  # twice in a SUBSCRIBE
    with pytest.raises(MqttError):
        encode(Publish("t", properties=Properties(session_expiry_interval=1)), MQTT_5)


def test_subscribe_options_and_empty_lists():
    def sub(option: int, version=MQTT_5) -> MqttError:
        body = u16(1) + (b"\x00" if version == MQTT_5 else b"") + string("a/b") + bytes((option,))
        return fails(b"\x82" + varint(len(body)) + body, version)
    assert sub(0x03).reason_code == 0x81 and sub(0x40).reason_code == 0x81 and sub(0x30).reason_code == 0x82
    assert sub(0x04, MQTT_3_1_1).reason_code == 0x81
    assert fails(b"\x82\x03\x00\x01\x00").reason_code == 0x82  # no filter
    assert fails(b"\xa2\x03\x00\x01\x00").reason_code == 0x82
    shared = u16(1) + b"\x00" + string("$share/g/a") + b"\x04"
    assert fails(b"\x82" + varint(len(shared)) + shared).reason_code == 0x82  # no local on a shared one


def test_a_subscribe_with_10000_filters_decodes_in_bounded_time_and_size():
    packet = Subscribe(1, [Subscription(f"site/{i}/+", 1) for i in range(10_000)])
    data = encode(packet, MQTT_5)
    assert len(data) < 200_000
    reader = PacketReader(256 * 1024, MQTT_5)
    (got,) = reader.feed(data)
    assert len(got.subscriptions) == 10_000 and got.subscriptions[-1].filter == "site/9999/+"
    assert fails(data, max_size=64 * 1024).reason_code == 0x95


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=64), max_size=12), st.sampled_from([None, 3, 4, 5]))
def test_fuzzed_input_raises_only_mqtt_errors_and_stays_bounded(chunks, version):
    reader = PacketReader(4096, version)
    for chunk in chunks:
        try:
            reader.feed(chunk)
        except MqttError:
            return
        assert reader.buffered <= 4096


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.integers(0, 15), st.sampled_from([4, 5]))
def test_fuzzed_bodies_behind_valid_headers_raise_only_mqtt_errors(body, kind, version):
    for flags in (0, 2, 0xB):
        data = bytes(((kind << 4) | flags,)) + varint(len(body)) + body
        try:
            for packet in PacketReader(4096, version).feed(data):
                encode(packet, version)  # whatever decoded re-encodes
        except MqttError:
            pass


def test_a_first_packet_other_than_connect_is_refused_at_its_fixed_header():
    reader = PacketReader(1 << 20)
    with pytest.raises(MqttError) as info:
        reader.feed(b"\x30\xff\xff\x3f")  # a 1 MB PUBLISH header before any CONNECT
    assert info.value.reason_code == 0x82 and reader.buffered == 0


def test_packet_identifier_zero_on_suback_and_unsuback_is_malformed():
    assert fails(b"\x90\x04\x00\x00\x00\x00").reason_code == 0x81
    assert fails(b"\xb0\x02\x00\x00", MQTT_3_1_1).reason_code == 0x81
