"""`PostOffice.post_unordered`: a management answer to a temporary reply queue is placed at once,
even while a durable send waits for the store (it used to wait behind it, so every management
call timed out during a store outage); any other plan is left to `post`, in order."""
from __future__ import annotations

from hermod.broker.core.message import ANYCAST
from hermod.broker.core.postoffice import PostOffice

from test_data_safety_routing import HeldJournal, durable_send
from test_routing import msg


def test_an_answer_to_a_temporary_queue_does_not_wait_for_the_store():
    journal = HeldJournal()
    po = PostOffice(journal=journal)
    po.create_queue("orders", "orders", ANYCAST)
    assert durable_send(po, "orders", "waits") == [] and journal.units  # the store has not answered
    reply = po.create_queue("reply-1", "reply-1", ANYCAST, durable=False, temporary=True)
    answer = msg("answer", "reply-1", ANYCAST)
    units = len(journal.units)
    assert po.post_unordered(po.route(answer, "reply-1", ANYCAST))
    assert reply.message_count == 1 and len(journal.units) == units  # placed, nothing stored


def test_any_other_plan_is_left_to_post():
    journal = HeldJournal()
    po = PostOffice(journal=journal)
    durable_send(po, "orders", "waits")
    plain = po.create_queue("plain", "plain", ANYCAST, durable=False)
    assert not po.post_unordered(po.route(msg("x", "plain", ANYCAST), "plain", ANYCAST))
    assert plain.message_count == 0 and plain.pending == 0
    assert not po.post_unordered(po.route(msg("x", "nowhere", ANYCAST), "nowhere", ANYCAST))
