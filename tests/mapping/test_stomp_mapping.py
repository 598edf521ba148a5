"""broker/mapping/stomp.py against the contract's table, read back by Proton (the AMQP side's
real client library): SEND headers to AMQP fields, text vs bytes, and stored AMQP messages to
MESSAGE headers and bodies (a map as its AMQP encoding)."""
from __future__ import annotations

import proton
from proton import Data, symbol

from hermod.broker.mapping.neutral import encode_message
from hermod.broker.mapping.stomp import AMQP_VALUE_TYPE, MappingError, from_send, to_message


def proton_message(encoded: bytes) -> proton.Message:
    m = proton.Message()
    m.decode(encoded)
    return m


def send(headers: list[tuple[str, str]], body, resolve=None):
    first: dict[str, str] = {}
    for k, v in headers:
        first.setdefault(k, v)
    return encode_message(from_send(first, tuple(headers), body, "ID:m-1", "anycast", 1700000000000, resolve))


def test_send_headers_become_amqp_fields():
    m = proton_message(send([("destination", "/queue/q"), ("correlation-id", "c"), ("reply-to", "/temp-queue/r"),
                             ("type", "t"), ("persistent", "true"), ("priority", "3"), ("expires", "1800000000000"),
                             ("JMSXGroupID", "g"), ("content-type", "text/plain"), ("receipt", "x"), ("k", "v"),
                             ("k", "ignored")], "text", resolve=lambda n, rt: f"tmp.{rt}.{n}"))
    assert (m.id, m.correlation_id, m.reply_to, m.subject, m.group_id) == ("ID:m-1", "c", "tmp.anycast.r", "t", "g")
    assert (m.durable, m.priority, m.content_type, m.expiry_time) == (True, 3, "text/plain", 1800000000.0)
    assert m.properties == {"k": "v"} and m.body == "text"
    assert m.annotations[symbol("x-opt-jms-msg-type")] == 5 and m.annotations[symbol("x-opt-jms-reply-to")] == 2
    assert m.annotations[symbol("x-opt-jms-dest")] == 0


def test_bytes_body_is_data_and_typed_bytes():
    m = proton_message(send([("destination", "/queue/q")], b"\x00\x01"))
    assert bytes(m.body) == b"\x00\x01" and m.annotations[symbol("x-opt-jms-msg-type")] == 3


def test_a_bad_priority_is_refused():
    try:
        send([("priority", "high")], "x")
    except MappingError as e:
        assert "priority" in str(e)
    else:
        raise AssertionError("accepted")


def test_amqp_message_to_stomp_headers():
    m = proton.Message(body="hi", id=7, correlation_id=b"\x01\x02", reply_to="back", subject="s", durable=True,
                       priority=9, properties={"n": 1, "b": False, "f": 1.5, "destination": "no"},
                       annotations={symbol("x-opt-jms-reply-to"): 1})
    headers, body = to_message(m.encode(), "/queue/q", lambda a, k: ("/topic/" if k == 1 else "/queue/") + a,
                               "fallback", True)
    h = dict(headers)
    assert body == b"hi" and h["message-id"] == "7" and h["correlation-id"] == "0102"
    assert (h["reply-to"], h["type"], h["persistent"], h["priority"], h["redelivered"]) == (
        "/topic/back", "s", "true", "9", "true")
    assert (h["n"], h["b"], h["f"], h["destination"]) == ("1", "false", "1.5", "/queue/q")


def test_a_map_body_is_its_amqp_encoding():
    m = proton.Message(body={"a": [1, 2], "b": None})
    headers, body = to_message(m.encode(), "/queue/q", lambda a, k: a, "fallback", False)
    assert dict(headers)["content-type"] == AMQP_VALUE_TYPE
    data = Data()
    data.decode(body)
    assert data.get_object() == {"a": [1, 2], "b": None}
    assert dict(headers)["message-id"] == "fallback"


def test_a_message_decoded_once_gives_the_same_frame_twice():
    encoded = proton.Message(body="same", properties={"x": "y"}).encode()
    first = to_message(encoded, "/topic/t", lambda a, k: a, "f", False)
    assert to_message(encoded, "/topic/t", lambda a, k: a, "f", False) == first
