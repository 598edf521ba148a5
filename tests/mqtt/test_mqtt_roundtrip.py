"""Every packet type in every version it exists in: encode, read back through the reader (fed
whole and one byte at a time), equal to what was encoded; the shortest forms of MQTT 5 acks."""
from __future__ import annotations

import pytest

from hermod.broker.mqtt import (MQTT_3_1, MQTT_3_1_1, MQTT_5, Auth, ConnAck, Connect, Disconnect, PacketReader,
                                PingReq, PingResp, Properties, PubAck, PubComp, Publish, PubRec, PubRel, SubAck,
                                Subscribe, Subscription, UnsubAck, Unsubscribe, Will, encode)

USER = (("dup", "1"), ("x", "é"), ("dup", "2"))


def samples(v: int) -> list:
    five = v == MQTT_5
    P = Properties if five else (lambda **kw: Properties())  # noqa: E731
    out = [
        Connect("dev-1", v, clean_start=False, keep_alive=0, username="u", password=b"\x00pw",
                will=Will("w/t", b"bye", 2, True, P(will_delay_interval=5, message_expiry_interval=9,
                                                   payload_format_indicator=1, content_type="text/plain",
                                                   response_topic="r/t", correlation_data=b"\x01",
                                                   user_properties=USER)),
                properties=P(session_expiry_interval=3600, receive_maximum=10, maximum_packet_size=1 << 20,
                             topic_alias_maximum=4, request_response_information=1,
                             request_problem_information=0, authentication_method="SCRAM",
                             authentication_data=b"a", user_properties=USER)),
        Connect("", v),
        ConnAck(v != MQTT_3_1, 0, P(session_expiry_interval=10, receive_maximum=5, maximum_qos=1,
                                    retain_available=0, maximum_packet_size=1000, assigned_client_identifier="x",
                                    topic_alias_maximum=3, reason_string="ok", wildcard_subscription_available=1,
                                    subscription_identifier_available=1, shared_subscription_available=1,
                                    server_keep_alive=20, response_information="ri", server_reference="s",
                                    authentication_method="m", authentication_data=b"d", user_properties=USER)),
        ConnAck(False, 0x86 if five else 4),
        Publish("a/b", b"", 0),
        Publish("a/b", b"\x00" * 300, 1, True, True, 65535,
                P(payload_format_indicator=0, message_expiry_interval=7, topic_alias=2, response_topic="re/p",
                  correlation_data=b"c", user_properties=USER, subscription_identifiers=(1, 268435455),
                  content_type="ct")),
        Publish("é/ü", b"x" * 200_000, 2, packet_id=1),
        PubAck(1), PubRec(2), PubRel(3), PubComp(4),
        Subscribe(9, [Subscription("a/+/c", 0), Subscription("#", 2, five, five, 2 if five else 0),
                      Subscription("$share/g/x", 1)], P(subscription_identifiers=(44,), user_properties=USER)),
        SubAck(9, [0, 1, 2, 0x80], P(reason_string="r", user_properties=USER)),
        Unsubscribe(10, ["a/+/c", "#"], P(user_properties=USER)),
        UnsubAck(10, [0x00, 0x11] if five else [], P(reason_string="r")),
        PingReq(), PingResp(), Disconnect(),
    ]
    if five:
        out += [
            PubAck(1, 0x10), PubRec(2, 0x80, Properties(reason_string="no")), PubRel(3, 0x92),
            PubComp(4, 0, Properties(user_properties=USER)),
            Publish("", b"aliased", 1, packet_id=5, properties=Properties(topic_alias=3)),
            Disconnect(0x04), Disconnect(0x8E, Properties(session_expiry_interval=0, reason_string="taken over",
                                                          server_reference="other", user_properties=USER)),
            Auth(), Auth(0x18, Properties(authentication_method="SCRAM", authentication_data=b"\x00\xff",
                                          reason_string="more", user_properties=USER)),
        ]
    return out


@pytest.mark.parametrize("version", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_every_packet_round_trips(version):
    for packet in samples(version):
        data = encode(packet, version)
        server = not isinstance(packet, Connect)
        # A CONNECT sets the reader's version itself; anything else needs it given.
        reader = PacketReader(1 << 20, version if server else None)
        assert reader.feed(data) == [packet], packet
        bytewise = PacketReader(1 << 20, version if server else None)
        got = []
        for i in range(0, len(data), 1 if len(data) < 2000 else 997):
            got += bytewise.feed(data[i:i + (1 if len(data) < 2000 else 997)])
        assert got == [packet]
        assert encode(got[0], version) == data


@pytest.mark.parametrize("version", [MQTT_3_1, MQTT_3_1_1, MQTT_5])
def test_a_stream_of_packets_splits_at_every_boundary(version):
    stream = b"".join(encode(p, version) for p in samples(version) if not isinstance(p, Connect))
    reader = PacketReader(1 << 20, version)
    got = []
    for i in range(0, len(stream), 4096):
        got += reader.feed(stream[i:i + 4096])
    assert got == [p for p in samples(version) if not isinstance(p, Connect)]
    assert reader.buffered == 0


def test_mqtt5_acks_use_the_short_forms():
    assert encode(PubAck(1), MQTT_5) == bytes.fromhex("40020001")
    assert encode(PubAck(1, 0x10), MQTT_5) == bytes.fromhex("4003000110")
    assert encode(PubRel(1), MQTT_5) == bytes.fromhex("62020001")
    assert encode(Disconnect(), MQTT_5) == bytes.fromhex("e000")
    assert encode(Disconnect(0x04), MQTT_5) == bytes.fromhex("e00104")
    assert encode(Auth(), MQTT_5) == bytes.fromhex("f000")
    # The longer forms, as some clients send them, decode the same.
    reader = PacketReader(100, MQTT_5)
    assert reader.feed(bytes.fromhex("400400011000") + bytes.fromhex("e0020400")) == [PubAck(1, 0x10),
                                                                                     Disconnect(0x04)]


def test_protocol_names_and_levels_on_the_wire():
    assert encode(Connect("c", MQTT_3_1), MQTT_3_1)[2:11] == b"\x00\x06MQIsdp\x03"
    assert encode(Connect("c", MQTT_3_1_1), MQTT_3_1_1)[2:9] == b"\x00\x04MQTT\x04"
    assert encode(Connect("c", MQTT_5), MQTT_5)[2:9] == b"\x00\x04MQTT\x05"
