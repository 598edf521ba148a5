"""The journal on both back-ends: what is committed comes back, once, in order."""
from __future__ import annotations


import pytest

from hermod.broker.core.ports import (
    AddMessage,
    AddReference,
    AddressRecord,
    DeleteAddress,
    DeleteQueue,
    DeleteReference,
    PutAddress,
    PutQueue,
    QueueRecord,
    SetDeliveryCount,
)
from hermod.store import StoreClosed, UnknownQueue
from store_testing import (
    Completions,
    Turn,
    held_post,
    message,
    queue,
    send,
    setup_ops,
    submit_and_wait,
    table_counts,
)


def ids(references) -> list[int]:
    return [r.message.id for r in references]


def test_committed_messages_come_back_in_order_after_reopen(store_url, open_store):
    journal = open_store(store_url)
    assert submit_and_wait(journal, setup_ops(queue("orders"))) is None
    for message_id in (1, 2, 3):
        assert submit_and_wait(journal, send(message_id, "orders", priority=7,
                                             expiration=111, scheduled_time=222,
                                             arrival=333, routing_type="anycast")) is None
    journal.close()

    recovered = open_store(store_url).recover()

    assert [a.name for a in recovered.addresses] == ["orders"]
    assert recovered.addresses[0].routing_types == frozenset({"anycast"})
    assert [q.name for q in recovered.queues] == ["orders"]
    refs = recovered.references["orders"]
    assert ids(refs) == [1, 2, 3]
    assert refs[0].message == message(1, priority=7, expiration=111, scheduled_time=222,
                                      arrival=333, routing_type="anycast")
    assert recovered.next_message_id == 4


def test_empty_store_recovers_nothing_and_starts_ids_at_one(store_url, open_store):
    recovered = open_store(store_url).recover()
    assert (recovered.addresses, recovered.queues, recovered.references) == ([], [], {})
    assert recovered.next_message_id == 1


def test_multicast_message_is_stored_once_with_a_reference_per_queue(store_url, open_store):
    subscriptions = [queue(f"sub{i}", "news", "multicast") for i in range(3)]
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(*subscriptions))
    submit_and_wait(journal, send(1, "sub0", "sub1", "sub2", address="news",
                                  body=b"x" * 1024))

    counts = table_counts(journal.engine)
    assert counts["messages"] == 1
    assert counts["message_refs"] == 3
    recovered = journal.recover()
    assert {name: ids(refs) for name, refs in recovered.references.items()} == {
        "sub0": [1], "sub1": [1], "sub2": [1]}


def test_acknowledging_the_last_reference_deletes_the_message(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("a", "news", "multicast"),
                                       queue("b", "news", "multicast")))
    submit_and_wait(journal, send(1, "a", "b", address="news"))

    submit_and_wait(journal, [DeleteReference("a", 1)])
    assert table_counts(journal.engine)["messages"] == 1

    submit_and_wait(journal, [DeleteReference("b", 1)])
    assert table_counts(journal.engine) == {"addresses": 1, "queues": 2, "messages": 0,
                                            "message_refs": 0}


def test_moving_a_message_in_one_unit_keeps_it(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("orders"), queue("DLQ")))
    submit_and_wait(journal, send(1, "orders"))

    # Either order inside the unit: the message is kept because DLQ references it at the end.
    submit_and_wait(journal, [DeleteReference("orders", 1), AddReference("DLQ", 1, 10)])

    recovered = journal.recover()
    assert recovered.references["orders"] == []
    assert [(r.message.id, r.delivery_count) for r in recovered.references["DLQ"]] == [(1, 10)]


def test_delivery_counts_survive_close_and_reopen(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("orders")))
    submit_and_wait(journal, send(1, "orders") + send(2, "orders"))
    submit_and_wait(journal, [SetDeliveryCount("orders", 1, 3)])
    submit_and_wait(journal, [SetDeliveryCount("orders", 2, 1), SetDeliveryCount("orders", 2, 2)])
    journal.close()

    recovered = open_store(store_url).recover()
    assert [(r.message.id, r.delivery_count) for r in recovered.references["orders"]] == [
        (1, 3), (2, 2)]


def test_delete_queue_removes_its_references_and_the_messages_only_it_held(store_url,
                                                                           open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("a", "news", "multicast"),
                                       queue("b", "news", "multicast")))
    submit_and_wait(journal, send(1, "a", "b", address="news"))  # shared
    submit_and_wait(journal, send(2, "a", address="news"))  # only on a

    submit_and_wait(journal, [DeleteQueue("a")])

    recovered = journal.recover()
    assert [q.name for q in recovered.queues] == ["b"]
    assert {name: ids(refs) for name, refs in recovered.references.items()} == {"b": [1]}
    assert table_counts(journal.engine)["messages"] == 1
    # An acknowledgement for the deleted queue arriving late is harmless.
    assert submit_and_wait(journal, [DeleteReference("a", 1)]) is None


def test_every_queue_attribute_and_updates_survive(store_url, open_store):
    subscription = QueueRecord(
        name="client1.sub", address="news", routing_type="multicast", filter="color = 'red'",
        max_consumers=1, exclusive=True, last_value_key="symbol", auto_created=True,
        purpose="subscription", extra={"client_id": "client1", "selectors": ["a > 1"]})
    journal = open_store(store_url)
    submit_and_wait(journal, [PutAddress(AddressRecord("news", frozenset({"anycast", "multicast"}),
                                                       auto_created=True)),
                              PutQueue(subscription)])
    submit_and_wait(journal, send(1, "client1.sub", address="news"))
    changed = QueueRecord(name="client1.sub", address="news", routing_type="multicast",
                          purpose="subscription", extra={"client_id": "client1"})
    submit_and_wait(journal, [PutQueue(changed)])
    journal.close()

    recovered = open_store(store_url).recover()
    assert recovered.addresses == [AddressRecord("news", frozenset({"anycast", "multicast"}), True)]
    assert recovered.queues == [changed]
    assert ids(recovered.references["client1.sub"]) == [1]  # the update kept its messages


def test_deleted_address_does_not_come_back(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, [PutAddress(AddressRecord("a", frozenset({"anycast"}))),
                              PutAddress(AddressRecord("b", frozenset({"multicast"})))])
    submit_and_wait(journal, [DeleteAddress("a")])
    assert [a.name for a in journal.recover().addresses] == ["b"]


def test_group_commit_puts_waiting_units_in_one_transaction(store_url, open_store):
    post, entered, release = held_post()  # the rest of the units group

    journal = open_store(store_url, post)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done(0))
    assert entered.wait(10)
    for n in range(1, 1000):
        journal.submit(send(n, "orders"), completions.done(n))
    release.set()

    calls = completions.wait_for(1000)
    assert calls == [(n, None) for n in range(1000)]  # all committed, in submission order
    stats = journal.stats()
    assert stats.units == 1000
    assert stats.commits < 1000
    assert stats.max_units_per_commit == 999
    assert ids(journal.recover().references["orders"]) == list(range(1, 1000))


def test_units_submitted_quickly_are_grouped(store_url, open_store):
    journal = open_store(store_url)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done(0))
    for n in range(1, 1000):
        journal.submit(send(n, "orders"), completions.done(n))
    assert completions.wait_for(1000) == [(n, None) for n in range(1000)]
    stats = journal.stats()
    assert stats.commits < stats.units == 1000
    assert stats.ops == 2 + 2 * 999


def test_read_page_returns_every_reference_once_in_order(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("deep"), queue("other")))
    submit_and_wait(journal, [op for n in range(1, 251) for op in send(n, "deep")])
    submit_and_wait(journal, send(251, "other"))
    submit_and_wait(journal, [SetDeliveryCount("deep", 7, 2), DeleteReference("deep", 8)])

    seen, after = [], 0
    while True:
        completions = Completions()
        journal.read_page("deep", after, 64, completions.done(None))
        page = completions.wait_for(1)[0][1]
        if not page:
            break
        assert len(page) <= 64
        seen.extend(page)
        after = page[-1].message.id

    assert ids(seen) == [n for n in range(1, 251) if n != 8]
    assert next(r.delivery_count for r in seen if r.message.id == 7) == 2
    assert seen[0].message == message(1)


def test_read_page_sees_the_units_submitted_before_it(store_url, open_store):
    journal = open_store(store_url)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    journal.submit(send(1, "orders"), completions.done("send"))
    journal.read_page("orders", 0, 10, completions.done("page"))
    journal.read_page("missing", 0, 10, completions.done("unknown queue"))
    calls = completions.wait_for(4)
    assert [tag for tag, _ in calls] == ["setup", "send", "page", "unknown queue"]
    assert ids(calls[2][1]) == [1]
    assert calls[3][1] == []


def test_a_faulty_unit_fails_alone_and_its_neighbours_commit(store_url, open_store):
    post, entered, release = held_post()  # the rest of the units group

    journal = open_store(store_url, post)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    assert entered.wait(10)
    journal.submit(send(1, "orders"), completions.done(1))
    journal.submit(send(2, "no-such-queue"), completions.done(2))
    journal.submit(send(3, "orders"), completions.done(3))
    release.set()

    calls = completions.wait_for(4)
    assert [tag for tag, _ in calls] == ["setup", 1, 2, 3]
    assert calls[1][1] is None and calls[3][1] is None
    assert isinstance(calls[2][1], UnknownQueue)
    assert ids(journal.recover().references["orders"]) == [1, 3]
    assert table_counts(journal.engine)["messages"] == 2  # nothing of unit 2 was applied
    assert journal.stats().failed_units == 1


def test_close_commits_and_completes_everything_submitted(store_url, open_store):
    journal = open_store(store_url)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done(0))
    for n in range(1, 200):
        journal.submit(send(n, "orders"), completions.done(n))
    journal.close()

    assert completions.count() == 200
    with pytest.raises(StoreClosed):
        journal.submit(send(500, "orders"), None)
    journal.close()  # twice is harmless
    assert ids(open_store(store_url).recover().references["orders"]) == list(range(1, 200))


def test_replaying_a_committed_unit_is_harmless(store_url, open_store):
    # What happens when a commit succeeded but its acknowledgement was lost with the connection.
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("orders")))
    unit = send(1, "orders")
    assert submit_and_wait(journal, unit) is None
    assert submit_and_wait(journal, unit) is None
    assert table_counts(journal.engine)["message_refs"] == 1


def test_statistics_describe_the_commits(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("orders")))  # 2 ops
    submit_and_wait(journal, send(1, "orders"))  # 2 ops
    submit_and_wait(journal, [AddMessage(message(2)), AddReference("orders", 2),
                              SetDeliveryCount("orders", 2, 1)])  # 3 ops
    stats = journal.stats()
    assert (stats.commits, stats.units, stats.ops) == (3, 3, 7)
    assert (stats.min_units_per_commit, stats.max_units_per_commit) == (1, 1)
    assert (stats.min_ops_per_commit, stats.max_ops_per_commit) == (2, 3)
    assert stats.avg_ops_per_commit == pytest.approx(7 / 3)
    assert "commits=3" in stats.summary()


def test_a_message_gone_in_an_earlier_unit_of_the_group_stays_gone(store_url, open_store):
    post, entered, release = held_post()  # the rest of the units group

    journal = open_store(store_url, post)
    completions = Completions()
    journal.submit(setup_ops(queue("a", "news", "multicast"), queue("b", "news", "multicast")),
                   completions.done("setup"))
    assert entered.wait(10)
    journal.submit(send(1, "a", address="news"), completions.done("send"))
    journal.submit([DeleteReference("a", 1)], completions.done("ack"))  # its last reference
    journal.submit([AddReference("b", 1)], completions.done("late copy"))
    release.set()

    calls = dict(completions.wait_for(4))
    assert calls["send"] is None and calls["ack"] is None
    assert calls["late copy"] is not None  # as if the units had been committed one by one
    assert table_counts(journal.engine)["messages"] == 0


def test_recovery_can_keep_only_a_window_of_each_queue(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("deep"), queue("short")))
    submit_and_wait(journal, [op for n in range(1, 11) for op in send(n, "deep")]
                    + send(11, "short"))

    recovered = journal.recover(window=4)
    assert ids(recovered.references["deep"]) == [1, 2, 3, 4]
    assert ids(recovered.references["short"]) == [11]
    assert recovered.next_message_id == 12
    completions = Completions()
    journal.read_page("deep", 4, 100, completions.done(None))
    assert ids(completions.wait_for(1)[0][1]) == list(range(5, 11))


def test_units_of_a_turn_go_to_the_writer_at_its_end_in_order_and_a_faulty_one_fails_alone(
        store_url, open_store):
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    journal.submit(send(1, "orders"), completions.done(1))
    journal.submit(send(2, "no-such-queue"), completions.done(2))
    journal.submit(send(3, "orders"), completions.done(3))
    assert len(turn.scheduled) == 1  # one hand-over per turn, however many units
    assert journal.stats().units == 0  # nothing written before the turn ends
    turn.end()

    calls = completions.wait_for(4)
    assert [tag for tag, _ in calls] == ["setup", 1, 2, 3]
    assert calls[0][1] is None and calls[1][1] is None and calls[3][1] is None
    assert isinstance(calls[2][1], UnknownQueue)
    assert ids(journal.recover().references["orders"]) == [1, 3]


def test_a_page_read_in_the_middle_of_a_turn_sees_the_units_submitted_before_it(store_url, open_store):
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    journal.submit(send(1, "orders"), completions.done("send"))
    journal.read_page("orders", 0, 10, completions.done("page"))  # before the turn ends
    calls = completions.wait_for(3)
    assert [tag for tag, _ in calls] == ["setup", "send", "page"]
    assert ids(calls[2][1]) == [1]
    turn.end()  # nothing left to hand over


def test_close_writes_the_units_of_a_turn_that_never_ended(store_url, open_store):
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done(0))
    for n in range(1, 50):
        journal.submit(send(n, "orders"), completions.done(n))
    journal.close()  # the loop stopped before the deferred hand-over ran
    assert completions.count() == 50
    with pytest.raises(StoreClosed):
        journal.submit(send(99, "orders"), None)
    turn.end()  # the hand-over running late does nothing
    assert ids(open_store(store_url).recover().references["orders"]) == list(range(1, 50))
