"""The pipeline's typed AMQP values (no Spark): type names from the encoding, the contract's text
forms, and the encoder the writer uses, checked against Proton's own encoding."""
from __future__ import annotations

import uuid

import pytest
from proton import Message, byte, char, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from hermod.broker.protocol import codec
from hermod.broker.spark.amqp_types import encode_typed, float_text, parse_text, typed_map, typed_text_map
from hermod.broker.spark.rows import encode_message, message_columns

VALUES = [
    ("s", "string", "héllo", "héllo"), ("y", "symbol", symbol("sym"), "sym"),
    ("t", "boolean", True, "true"), ("f", "boolean", False, "false"),
    ("b", "byte", byte(-128), "-128"), ("sh", "short", short(-2), "-2"), ("i", "int", int32(-7), "-7"),
    ("l", "long", -(2 ** 50), str(-(2 ** 50))), ("ub", "ubyte", ubyte(255), "255"),
    ("us", "ushort", ushort(65535), "65535"), ("ui", "uint", uint(4_000_000_000), "4000000000"),
    ("ul", "ulong", ulong(2 ** 64 - 1), str(2 ** 64 - 1)), ("fl", "float", float32(2.5), "2.5"),
    ("f1", "float", float32(0.1), "0.1"), ("d", "double", 0.1, "0.1"), ("d3", "double", 3.0, "3.0"),
    ("ts", "timestamp", timestamp(1_777_636_800_250), "2026-05-01T12:00:00.250Z"),
    ("u", "uuid", uuid.UUID("12345678-1234-5678-1234-567812345678"),
     "12345678-1234-5678-1234-567812345678"),
    ("bin", "binary", b"\x00\xab", "00ab"), ("c", "char", char("é"), "é"), ("n", "null", None, None),
]


def encoded_with(properties: dict) -> bytes:
    return Message(body="x", properties=properties).encode()


def test_type_names_and_text_forms_of_application_properties():
    encoded = encoded_with({key: value for key, _kind, value, _text in VALUES})
    at = codec.Envelope(encoded).app_properties_at
    assert {k: kind for k, kind, _ in typed_text_map(encoded, at)} == {k: kind for k, kind, _, _ in VALUES}
    assert {k: text for k, _, text in typed_text_map(encoded, at)} == {k: t for k, _, _, t in VALUES}
    decoded = {k: (kind, value) for k, kind, value in typed_map(encoded, at)}
    assert decoded["ts"] == ("timestamp", 1_777_636_800_250)


@pytest.mark.parametrize("key, kind, value, text", [v for v in VALUES if v[1] != "null"])
def test_the_writer_encodes_each_type_as_proton_reads_it(key, kind, value, text):
    ours = encode_message("string", "x", durable=False,
                          application_properties=[(key, kind, parse_text(kind, text))])
    at = codec.Envelope(ours).app_properties_at
    assert typed_text_map(ours, at) == [(key, kind, text)]
    message = Message()
    message.decode(ours)
    received = message.properties[key]
    if kind == "binary":
        assert bytes(received) == value
    else:
        assert type(received) is type(value)
        assert received == value or kind == "float"


def test_float_text_is_the_shortest_that_reads_back():
    assert float_text(float(float32(0.1)), single=True) == "0.1"
    assert float_text(1e20) == "1e+20"
    assert float_text(float("nan")) == "nan"
    assert encode_typed("float", 0.1) == b"\x72\x3d\xcc\xcc\xcd"


def test_message_columns_of_a_message_without_properties_or_body():
    cols = message_columns(Message().encode())
    assert cols[:3] == (None, False, 4)
    assert cols[6:] == ({}, {}, {}, None, None)


def test_the_protocol_type_system_names_each_width_and_encodes_by_name():
    """The one AMQP type system (broker/protocol/amqptypes.py): what Proton encodes is named
    with its width, described values and arrays included, and `encode_as` writes it back as
    the same type."""
    from proton import UNDESCRIBED, Array, Data, Described as PDescribed

    from hermod.broker.protocol import amqptypes

    cases = [(ubyte(7), "ubyte"), (uint(7), "uint"), (ulong(7), "ulong"), (7, "long"),
             (symbol("s"), "symbol"), ("s", "string"), (char("c"), "char"),
             (PDescribed(symbol("d"), "v"), "described"), (Array(UNDESCRIBED, Data.UBYTE, 1, 2), "array")]
    for value, kind in cases:
        data = Data()
        data.put_object(value)
        encoded = data.encode()
        found_kind, decoded, end = amqptypes.decode_typed(encoded)
        assert (found_kind, end) == (kind, len(encoded))
        if kind not in ("described", "array"):
            assert amqptypes.decode_typed(amqptypes.encode_as(kind, decoded))[:2] == (kind, decoded)
    assert amqptypes.decode_typed(amqptypes.encode_as("ushort", 9)) == ("ushort", 9, 3)
    entries = [("a", "ubyte", 1), ("b", "symbol", "x"), ("c", "null", None)]
    assert amqptypes.typed_map_entries(amqptypes.encode_typed_map(entries), 0) == entries
