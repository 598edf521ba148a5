"""broker.core.selectable: one row per identifier of the table in docs/selectors.md.

The message is a plain dataclass with the attributes the core's Message has (a test fixture,
not a broker).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from hermod.broker.core.selectable import HEADERS, annotation_key, counted_lookup, message_lookup
from hermod.broker.selector import compile_selector


class Symbol(str):
    pass


@dataclass
class Message:
    durable: bool = False
    priority: int | None = 4
    message_id: object = None
    correlation_id: object = None
    user_id: bytes | None = None
    subject: str | None = None
    creation_time: int | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    expiration: int = 0
    address: str = "orders"
    size: int = 100
    annotations: dict = field(default_factory=dict)
    application_properties: dict = field(default_factory=dict)
    container_id: str | None = None


UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")

# (identifier, message fields, expected value, exact type of the value)
ROWS = [
    ("JMSMessageID", {"message_id": "order-1"}, "ID:order-1", str),
    ("JMSMessageID", {"message_id": "ID:order-1"}, "ID:order-1", str),
    ("JMSMessageID", {"message_id": Symbol("order-1")}, "ID:order-1", str),
    ("JMSMessageID", {"message_id": UUID}, f"ID:{UUID}", str),
    ("JMSMessageID", {"message_id": 42}, "ID:42", str),
    ("JMSMessageID", {"message_id": b"\x01\xab"}, "ID:AMQP_BINARY:01AB", str),
    ("JMSMessageID", {}, None, type(None)),
    ("AMQUserID", {"message_id": "order-1"}, "ID:order-1", str),
    ("AMQUserID", {"message_id": UUID}, f"ID:{UUID}", str),
    ("JMSCorrelationID", {"correlation_id": "req-7"}, "req-7", str),
    ("JMSCorrelationID", {"correlation_id": Symbol("req-7")}, "req-7", str),
    ("JMSCorrelationID", {"correlation_id": UUID}, f"ID:AMQP_UUID:{UUID}", str),
    ("JMSCorrelationID", {"correlation_id": 42}, "ID:AMQP_ULONG:42", str),
    ("JMSCorrelationID", {"correlation_id": b"req"}, b"req", bytes),
    ("JMSCorrelationID", {}, None, type(None)),
    ("JMSType", {"subject": "invoice"}, "invoice", str),
    ("JMSType", {}, None, type(None)),
    ("JMSPriority", {"priority": 7}, 7, int),
    ("JMSPriority", {"priority": None}, 4, int),
    ("AMQPriority", {"priority": 9}, 9, int),
    ("JMSDeliveryMode", {"durable": True}, "PERSISTENT", str),
    ("JMSDeliveryMode", {"durable": False}, "NON_PERSISTENT", str),
    ("AMQDurable", {"durable": True}, "DURABLE", str),
    ("AMQDurable", {"durable": False}, "NON_DURABLE", str),
    ("JMSTimestamp", {"creation_time": 1_700_000_000_000}, 1_700_000_000_000, int),
    ("JMSTimestamp", {}, 0, int),
    ("AMQTimestamp", {"creation_time": 5}, 5, int),
    ("AMQTimestamp", {}, 0, int),
    ("JMSExpiration", {"expiration": 1_700_000_060_000}, 1_700_000_060_000, int),
    ("JMSExpiration", {}, 0, int),
    ("AMQExpiration", {"expiration": 9}, 9, int),
    ("JMSXGroupID", {"group_id": "g1"}, "g1", str),
    ("JMSXGroupID", {}, None, type(None)),
    ("AMQGroupID", {"group_id": "g1"}, "g1", str),
    ("JMSXGroupSeq", {"group_sequence": 3}, 3, int),
    ("JMSXGroupSeq", {}, 0, int),
    ("JMSXUserID", {"user_id": b"alice"}, "alice", str),
    ("JMSXUserID", {"user_id": "bob"}, "bob", str),
    ("JMSXUserID", {"user_id": b"\xffx"}, "\ufffdx", str),
    ("JMSXUserID", {}, None, type(None)),
    ("JMSXDeliveryCount", {"delivery_count": 0}, 1, int),
    ("JMSXDeliveryCount", {"delivery_count": 4}, 5, int),
    ("JMSRedelivered", {"delivery_count": 0}, False, bool),
    ("JMSRedelivered", {"delivery_count": 1}, True, bool),
    ("JMSDestination", {"address": "orders"}, None, type(None)),
    ("JMSReplyTo", {}, None, type(None)),
    ("AMQSize", {"size": 512}, 512, int),
    ("AMQAddress", {"address": "orders"}, "orders", str),
    ("__AMQ_CID", {"container_id": "producer-1"}, "producer-1", str),
    ("__AMQ_CID", {}, None, type(None)),
    ("region", {"application_properties": {"region": "EU"}}, "EU", str),
    ("region", {}, None, type(None)),
    ("nothing", {"application_properties": {"nothing": None}}, None, type(None)),
    ("m.x-opt-foo", {"annotations": {"x-opt-foo": "bar"}}, "bar", str),
    ("m.x-opt-foo", {}, None, type(None)),
    ("m.x-opt-sym", {"annotations": {"x-opt-sym": Symbol("s")}}, "s", Symbol),  # passes through
    ("_AMQ_ORIG_ADDRESS", {"annotations": {"x-opt-ORIG-ADDRESS": "orders"}}, "orders", str),
    ("_AMQ_ORIG_QUEUE", {"annotations": {"x-opt-ORIG-QUEUE": "q1"}}, "q1", str),
    ("_AMQ_ORIG_ADDRESS", {}, None, type(None)),
    ("x-opt-ORIG-ADDRESS", {"annotations": {"x-opt-ORIG-ADDRESS": "orders"}}, None, type(None)),
]


@pytest.mark.parametrize("identifier, fields, expected, value_type", ROWS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_identifier(identifier, fields, expected, value_type):
    fields = dict(fields)
    if "delivery_count" in fields:  # the ref's count, not the message's: a consumer's lookup
        count = fields.pop("delivery_count")
        value = counted_lookup(Message(**fields), count)(identifier)
    else:
        value = message_lookup(Message(**fields))(identifier)
    assert value == expected
    assert type(value) is value_type


def test_a_message_alone_is_on_its_first_delivery():
    """What a filter applied while routing sees: no ref, no delivery yet."""
    lookup = message_lookup(Message())
    assert (lookup("JMSRedelivered"), lookup("JMSXDeliveryCount")) == (False, 1)


def test_every_header_identifier_has_a_row():
    assert set(HEADERS) <= {row[0] for row in ROWS}


def test_headers_win_over_application_properties():
    msg = Message(priority=2, application_properties={"JMSPriority": 9, "AMQSize": 1, "__AMQ_CID": "spoof"},
                  container_id="real")
    lookup = message_lookup(msg)
    assert lookup("JMSPriority") == 2
    assert lookup("AMQSize") == 100
    assert lookup("__AMQ_CID") == "real"


def test_application_properties_win_over_annotation_names():
    msg = Message(application_properties={"m.k": "property", "_AMQ_ORIG_ADDRESS": "property"},
                  annotations={"k": "annotation", "x-opt-ORIG-ADDRESS": "annotation"})
    lookup = message_lookup(msg)
    assert lookup("m.k") == "property"
    assert lookup("_AMQ_ORIG_ADDRESS") == "property"


def test_null_application_property_still_wins():
    msg = Message(application_properties={"m.k": None}, annotations={"k": "annotation"})
    assert message_lookup(msg)("m.k") is None


def test_annotation_key_rule():
    assert annotation_key("m.x-opt-foo") == "x-opt-foo"
    assert annotation_key("_AMQ_ORIG_ADDRESS") == "x-opt-ORIG-ADDRESS"
    assert annotation_key("_AMQ_ROUTING_TYPE") == "x-opt-ROUTING-TYPE"
    assert annotation_key("__AMQ_CID") is None
    assert annotation_key("region") is None


def test_missing_sections_are_null():
    msg = Message(application_properties=None, annotations=None)  # type: ignore[arg-type]
    lookup = message_lookup(msg)
    assert lookup("region") is None
    assert lookup("m.x") is None


class LazyMessage(Message):
    """Counts how often application properties are decoded."""

    decoded = 0

    def __getattribute__(self, name):
        if name == "application_properties":
            LazyMessage.decoded += 1
        return super().__getattribute__(name)


def test_header_only_selectors_do_not_decode_application_properties():
    LazyMessage.decoded = 0
    msg = LazyMessage(priority=7, durable=True)
    assert compile_selector("JMSPriority > 4 AND JMSDeliveryMode = 'PERSISTENT'").matches(message_lookup(msg))
    assert LazyMessage.decoded == 0
    compile_selector("region = 'EU'").matches(message_lookup(msg))
    assert LazyMessage.decoded == 1


def test_selectors_over_a_message():
    msg = Message(durable=True, priority=6, message_id="m1", subject="invoice", group_id="g",
                  application_properties={"region": "EU", "price": 150},
                  annotations={"x-opt-ORIG-ADDRESS": "orders"}, container_id="c1")
    lookup = message_lookup(msg)
    for selector in (
        "region = 'EU' AND price > 100",
        "JMSType = 'invoice' AND JMSPriority BETWEEN 5 AND 9",
        "JMSMessageID = 'ID:m1' AND AMQUserID = 'ID:m1'",
        "\"m.x-opt-ORIG-ADDRESS\" = 'orders' AND _AMQ_ORIG_ADDRESS = 'orders'",
        "__AMQ_CID <> 'c2'",  # no-local: not from my own container
        "JMSXGroupID = 'g' AND JMSXGroupSeq = 0",
        "JMSCorrelationID IS NULL AND JMSTimestamp = 0",
    ):
        assert compile_selector(selector).matches(lookup), selector
    assert not compile_selector("__AMQ_CID <> 'c1'").matches(lookup)
    assert compile_selector("JMSCorrelationID = 'x'").evaluate(lookup) is None


def test_binary_correlation_id_never_equals_a_string():
    lookup = message_lookup(Message(correlation_id=b"abc"))
    assert compile_selector("JMSCorrelationID = 'abc'").evaluate(lookup) is False
