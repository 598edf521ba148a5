"""The encoder (round trips through the parser), version and heart-beat negotiation, the
contract's text-or-bytes rule and its destination names."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermod.broker.stomp import (ALL_COMMANDS, ANYCAST, MULTICAST, Destination, FrameParser, StompError,
                                 UnsupportedVersion, destination_name, encode_frame, is_text, negotiate_heart_beat,
                                 negotiate_version, parse_destination, parse_heart_beat, send_body)


def reparse(data: bytes, version: str | None):
    [frame] = FrameParser(version=version, commands=ALL_COMMANDS).feed(data)
    return frame


# --- encoder ------------------------------------------------------------------------------------

def test_message_always_has_content_length_and_keeps_header_order():
    data = encode_frame("MESSAGE", [("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a")],
                        b"hello queue a")
    assert data == (b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-length:13\n\n"
                    b"hello queue a\x00")


def test_empty_error_and_message_still_carry_content_length():
    assert encode_frame("ERROR", {"message": "bad"}) == b"ERROR\nmessage:bad\ncontent-length:0\n\n\x00"
    assert b"content-length:0\n" in encode_frame("MESSAGE", {"destination": "/queue/a"})


def test_callers_content_length_is_replaced_by_the_true_one():
    data = encode_frame("MESSAGE", [("content-length", "99"), ("destination", "q")], b"\x00\x01")
    assert data.count(b"content-length") == 1
    assert reparse(data, "1.2").body == b"\x00\x01"


def test_receipt_and_connected_have_no_body_and_no_length():
    assert encode_frame("RECEIPT", {"receipt-id": "77"}) == b"RECEIPT\nreceipt-id:77\n\n\x00"
    assert encode_frame("CONNECTED", {"version": "1.2", "heart-beat": "0,0"}) == \
        b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00"


AWKWARD = "a:b\\c\nd\re€"


def test_12_escapes_every_special_and_round_trips():
    data = encode_frame("MESSAGE", [(AWKWARD, AWKWARD)], b"x", "1.2")
    assert b"a\\cb\\\\c\\nd\\re\xe2\x82\xac:" in data
    assert reparse(data, "1.2").headers[0] == (AWKWARD, AWKWARD)


def test_11_escapes_but_cannot_carry_cr():
    frame = reparse(encode_frame("MESSAGE", [("k", AWKWARD)], b"", "1.1"), "1.1")
    assert frame.header("k") == "a:b\\c\nd\ufffde€"


@pytest.mark.parametrize("version", ["1.0", None])
def test_10_and_unnegotiated_never_break_the_framing(version):
    frame = reparse(encode_frame("ERROR", [("message", "line1\nline2\r"), ("a:b", "c:d")], "body", version), "1.0")
    assert frame.headers == (("message", "line1\ufffdline2\ufffd"), ("a\ufffdb", "c:d"), ("content-length", "4"))


def test_connected_is_not_escaped_even_in_12():
    data = encode_frame("CONNECTED", {"server": "hermod/1:2"}, version="1.2")
    assert b"server:hermod/1:2\n" in data


header_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(command=st.sampled_from(["MESSAGE", "ERROR", "RECEIPT", "SEND"]),
       headers=st.lists(st.tuples(header_text.filter(lambda s: s != "" and s != "content-length"), header_text),
                        max_size=8),
       body=st.binary(max_size=200))
def test_round_trip_12_and_11(command, headers, body):
    for version in ("1.2", "1.1"):
        frame = reparse(encode_frame(command, headers, body, version), version)
        expected = [(n, v) for n, v in headers] if version == "1.2" else \
            [(n.replace("\r", "\ufffd"), v.replace("\r", "\ufffd")) for n, v in headers]
        assert list(frame.headers[:len(headers)]) == expected
        assert frame.body == body


# --- negotiation --------------------------------------------------------------------------------

@pytest.mark.parametrize("offered,chosen", [
    (None, "1.0"), ("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2"), ("1.0,1.1,2.0", "1.1"),
    ("1.0,1.1,1.2", "1.2"), ("1.2,1.0", "1.2"), (" 1.1 , 1.0", "1.1")])
def test_highest_common_version(offered, chosen):
    assert negotiate_version(offered) == chosen


@pytest.mark.parametrize("offered", ["2.0", "", "2.1,3.0", "1.3"])
def test_no_common_version_lists_the_supported_ones(offered):
    with pytest.raises(UnsupportedVersion, match="Supported protocol versions are 1.0 1.1 1.2") as e:
        negotiate_version(offered)
    assert e.value.supported == ("1.0", "1.1", "1.2")
    assert isinstance(e.value, StompError)


@pytest.mark.parametrize("client,server,intervals", [
    (None, (10000, 10000), (0, 0)),          # a 1.0 client: no heart-beating
    ("0,0", (10000, 10000), (0, 0)),
    ("4000,5000", (10000, 10000), (10000, 10000)),
    ("4000,15000", (10000, 2000), (15000, 4000)),
    ("0,5000", (1000, 1000), (5000, 0)),      # client cannot send: broker expects nothing
    ("4000,0", (1000, 1000), (0, 4000)),      # client wants nothing: broker sends nothing
    ("4000,5000", (0, 0), (0, 0)),
    ("4000,5000", (0, 3000), (0, 4000)),
])
def test_heart_beat_negotiation(client, server, intervals):
    assert negotiate_heart_beat(client, server) == intervals


@pytest.mark.parametrize("value", ["", "1", "1,2,3", "a,b", "-1,0", "1.5,2", ",", "1,", "1" * 20 + ",0"])
def test_malformed_heart_beat_is_an_error(value):
    with pytest.raises(StompError, match="heart-beat"):
        parse_heart_beat(value)


# --- text or bytes ------------------------------------------------------------------------------

@pytest.mark.parametrize("headers,text", [
    ({}, True),
    ({"content-length": "3"}, False),
    ({"content-length": "3", "content-type": "text/plain"}, True),
    ({"content-length": "3", "content-type": "TEXT/HTML; charset=utf-8"}, True),
    ({"content-length": "3", "content-type": "application/json;charset=UTF-8"}, True),
    ({"content-length": "3", "content-type": "application/octet-stream"}, False),
    ({"content-type": "application/octet-stream"}, True),   # no content-length: text
    ({"content-length": "3", "amq-msg-type": "text"}, True),
    ({"content-type": "text/plain", "amq-msg-type": "bytes"}, False),
    ({"amq-msg-type": "bytes"}, False),
])
def test_text_or_bytes_rule(headers, text):
    assert is_text(headers) is text


def test_send_body_decodes_text_and_keeps_bytes():
    assert send_body({}, "héllo".encode()) == "héllo"
    assert send_body({"content-length": "2"}, b"\xff\x00") == b"\xff\x00"
    assert send_body({"content-type": "text/plain;charset=iso-8859-1", "content-length": "1"}, b"\xe9") == "é"


def test_text_body_that_is_not_utf8_is_an_error():
    with pytest.raises(StompError, match="not valid utf-8"):
        send_body({"content-type": "text/plain", "content-length": "2"}, b"\xff\xfe")
    with pytest.raises(StompError, match="not valid utf-8"):
        send_body({}, b"\xc3")


def test_bad_amq_msg_type_and_unknown_charset_are_errors():
    with pytest.raises(StompError, match="amq-msg-type"):
        is_text({"amq-msg-type": "map"})
    with pytest.raises(StompError, match="unknown charset"):
        send_body({"content-type": "text/plain; charset=klingon"}, b"x")


# --- destination names --------------------------------------------------------------------------

@pytest.mark.parametrize("name,dtype,stype,expected", [
    ("/queue/orders", None, None, Destination("orders", ANYCAST)),
    ("/topic/prices", None, None, Destination("prices", MULTICAST)),
    ("/temp-queue/r1", None, None, Destination("r1", ANYCAST, True)),
    ("/temp-topic/e1", None, None, Destination("e1", MULTICAST, True)),
    ("orders", None, None, Destination("orders", None)),
    ("orders", "ANYCAST", None, Destination("orders", ANYCAST)),
    ("orders", "multicast", None, Destination("orders", MULTICAST)),
    ("orders", None, "MULTICAST", Destination("orders", MULTICAST)),
    ("orders", "ANYCAST", "MULTICAST", Destination("orders", ANYCAST)),
    ("/queue/orders", "MULTICAST", None, Destination("orders", ANYCAST)),  # the prefix wins
    ("/queue/orders::q1", None, None, Destination("orders::q1", ANYCAST)),
    ("a,b,topic://c", None, None, Destination("a,b,topic://c", None)),
    ("/topic/sport.>", None, None, Destination("sport.>", MULTICAST)),
    ("/queuex", None, None, Destination("/queuex", None)),
])
def test_destination_names(name, dtype, stype, expected):
    assert parse_destination(name, dtype, stype) == expected


@pytest.mark.parametrize("name,dtype", [(None, None), ("", None), ("/queue/", None), ("/temp-topic/", None),
                                        ("q", "QUEUE")])
def test_bad_destinations_are_errors(name, dtype):
    with pytest.raises(StompError):
        parse_destination(name, dtype)


@pytest.mark.parametrize("dest", [Destination("q", ANYCAST), Destination("t", MULTICAST),
                                  Destination("r", ANYCAST, True), Destination("e", MULTICAST, True)])
def test_destination_name_inverts_parse(dest):
    assert parse_destination(destination_name(dest.address, dest.routing, dest.temporary)) == dest


def test_destination_name_of_unknown_routing_is_bare():
    assert destination_name("orders", None) == "orders"
