"""Units of parts (`SqlJournal.open_unit` / `add_part`, used by `core.bursts`): one producer
link's sends of a reactor turn stored as one unit, on both back-ends. A part joins only the last
unit of the turn (journal order is submission order); a part's own fault fails that part alone;
an outage past `fail_after_s` fails the unit whole, with nothing of it stored."""
from __future__ import annotations

import sqlite3

from hermod.broker.core.ports import DeleteQueue
from hermod.store import StoreUnavailable, UnknownQueue
from store_testing import Completions, Turn, held_post, queue, send, setup_ops, table_counts


def stored_ids(journal, queue_name: str) -> list[int]:
    return [r.message.id for r in journal.recover().references.get(queue_name, [])]


def test_parts_of_a_turn_are_one_unit_and_a_faulty_part_fails_alone(store_url, open_store):
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders"), queue("audit")), completions.done("setup"))
    unit = journal.open_unit(send(1, "orders"), completions.done("burst"))
    assert journal.add_part(unit, send(2, "orders", "audit"))
    assert journal.add_part(unit, send(3, "no-such-queue"))  # a part's own fault
    assert journal.add_part(unit, [])  # a non-durable send waiting behind durable ones
    assert journal.add_part(unit, send(4, "audit"))
    turn.end()

    calls = completions.wait_for(2)
    assert [tag for tag, _ in calls] == ["setup", "burst"]
    outcomes = calls[1][1]
    assert isinstance(outcomes, list) and len(outcomes) == 5
    assert [o is None for o in outcomes] == [True, True, False, True, True]
    assert isinstance(outcomes[2], UnknownQueue)
    assert stored_ids(journal, "orders") == [1, 2]
    assert stored_ids(journal, "audit") == [2, 4]
    assert table_counts(journal.engine)["messages"] == 3  # nothing of part 3 was applied
    assert journal.stats().failed_units == 1


def test_a_unit_of_parts_that_commits_completes_once_with_none(store_url, open_store):
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    unit = journal.open_unit(send(1, "orders"), completions.done("burst"))
    for n in range(2, 201):
        assert journal.add_part(unit, send(n, "orders"))
    turn.end()
    assert completions.wait_for(2) == [("setup", None), ("burst", None)]
    assert stored_ids(journal, "orders") == list(range(1, 201))


def test_a_part_joins_only_the_last_unit_of_the_turn(store_url, open_store):
    """Whatever is submitted after a unit of parts closes it: a later part opens a new unit, so
    the store applies everything in the order it was submitted (here the queue's deletion
    after the first send, before the second)."""
    turn = Turn()
    journal = open_store(store_url, defer=turn.defer)
    completions = Completions()
    journal.submit(setup_ops(queue("orders"), queue("gone")), completions.done("setup"))
    first = journal.open_unit(send(1, "gone"), completions.done("first"))
    journal.submit([DeleteQueue("gone")], completions.done("delete"))
    assert not journal.add_part(first, send(2, "gone"))  # would jump the deletion
    second = journal.open_unit(send(2, "gone"), completions.done("second"))
    turn.end()
    assert not journal.add_part(second, send(3, "orders"))  # the turn was handed over

    calls = completions.wait_for(4)
    assert [tag for tag, _ in calls] == ["setup", "first", "delete", "second"]
    assert calls[1][1] is None and calls[2][1] is None
    assert isinstance(calls[3][1], UnknownQueue)  # a single part: the unit's fault is its own
    assert "gone" not in journal.recover().references


def test_an_outage_past_fail_after_fails_the_unit_of_parts_whole(sqlite_url, open_store):
    path = sqlite_url.removeprefix("sqlite:///")
    turn = Turn()
    journal = open_store(sqlite_url, defer=turn.defer, fail_after_s=0.5)
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    turn.end()
    completions.wait_for(1)
    lock = sqlite3.connect(path, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")  # the store cannot commit until the test lets it
    try:
        unit = journal.open_unit(send(1, "orders"), completions.done("burst"))
        assert journal.add_part(unit, send(2, "orders"))
        turn.end()
        calls = completions.wait_for(2)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert isinstance(calls[1][1], StoreUnavailable)  # one error for every part
    assert stored_ids(journal, "orders") == []


def test_without_a_turn_every_part_is_a_unit_of_its_own(store_url, open_store):
    post, entered, release = held_post()
    journal = open_store(store_url, post)  # no `defer`: units go to the writer at once
    completions = Completions()
    journal.submit(setup_ops(queue("orders")), completions.done("setup"))
    assert entered.wait(10)
    unit = journal.open_unit(send(1, "orders"), completions.done("alone"))
    assert not journal.add_part(unit, send(2, "orders"))
    release.set()
    assert completions.wait_for(2) == [("setup", None), ("alone", None)]
