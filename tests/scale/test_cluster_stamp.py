"""The duplicate-id stamp of a forwarded copy (broker/cluster_forward.py): `_AMQ_DUPL_ID` set to
ORIGIN@QUEUE, the producer's own id kept as the origin, everything else byte for byte."""
from __future__ import annotations

from proton import Message

from hermod.broker.cluster_forward import stamp, stamped
from hermod.broker.core.message import Message as Held
from hermod.broker.protocol.codec import Envelope


def _held(message: Message, message_id: int = 42) -> Held:
    encoded = message.encode()
    return Held(encoded, Envelope(encoded), "orders", message_id=message_id)


def _decoded(encoded: bytes) -> Message:
    message = Message()
    message.decode(encoded)
    return message


def test_a_copy_without_an_id_is_stamped_with_its_origin_message_and_queue():
    original = Message(body="b", durable=True, subject="s", properties={"n": 7},
                       annotations={"x-opt-a": "v"})
    held = _held(original)
    value = stamp(held, "node-a 1234", "orders-q")
    assert value == "node-a 1234/42@orders-q"
    copy = _decoded(stamped(held.encoded, value))
    assert copy.properties == {"n": 7, "_AMQ_DUPL_ID": "node-a 1234/42@orders-q"}
    assert (copy.body, copy.subject, copy.durable) == ("b", "s", True)
    assert copy.annotations == {"x-opt-a": "v"}
    # the bytes before the application properties are untouched
    at = Envelope(held.encoded).app_properties_at
    assert stamped(held.encoded, value)[:at] == held.encoded[:at]


def test_the_producers_own_id_is_the_origin_and_is_replaced_not_repeated():
    held = _held(Message(body="b", properties={"_AMQ_DUPL_ID": "client-7", "k": "v"}))
    value = stamp(held, "node-a 1234", "q2")
    assert value == "client-7@q2"
    copy = _decoded(stamped(held.encoded, value))
    assert copy.properties == {"_AMQ_DUPL_ID": "client-7@q2", "k": "v"}
    assert stamped(held.encoded, value).count(b"_AMQ_DUPL_ID") == 1


def test_a_message_without_application_properties_gets_them_before_its_body():
    held = _held(Message(body={"a": 1}))
    copy = _decoded(stamped(held.encoded, "o/1@q"))
    assert copy.properties == {"_AMQ_DUPL_ID": "o/1@q"}
    assert copy.body == {"a": 1}
