"""Group commit gives the same store as applying units one by one.

Hypothesis draws a history of units (sends to several queues, acks, delivery counts, moves,
copies of a message to another queue, queues created and deleted, units that must fail);
the journal commits them grouped in a few transactions; what it recovers must equal a plain
model that applies the same units in order, each unit atomic, a message going at the end of the
unit that took its last reference.
"""
from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from hermod.broker.core.ports import (
    AddMessage,
    AddReference,
    DeleteQueue,
    DeleteReference,
    PutQueue,
    SetDeliveryCount,
)
from hermod.store import SqlJournal, UnknownQueue, schema
from hermod.store.engine import make_engine
from hermod.store.models import messages
from store_testing import Completions, held_post, message, queue

QUEUE_NAMES = [f"q{i}" for i in range(4)]


class Model:
    def __init__(self) -> None:
        self.queues: dict[str, dict[int, int]] = {}
        self.messages: set[int] = set()
        self.gone: set[int] = set()  # messages stored once and deleted since
        self.next_id = 1

    def apply(self, ops) -> bool:
        """Apply one unit atomically; False (and no change) if it must fail."""
        queues = {name: dict(refs) for name, refs in self.queues.items()}
        stored = set(self.messages)
        lost_a_reference: set[int] = set()
        for op in ops:
            if isinstance(op, PutQueue):
                queues.setdefault(op.queue.name, {})
            elif isinstance(op, DeleteQueue):
                for message_id in queues.pop(op.name, {}):
                    if not any(message_id in refs for refs in queues.values()):
                        stored.discard(message_id)
            elif isinstance(op, AddMessage):
                stored.add(op.message.id)
            elif isinstance(op, AddReference):
                if op.queue not in queues or op.message_id not in stored:
                    return False
                queues[op.queue].setdefault(op.message_id, op.delivery_count)
            elif isinstance(op, DeleteReference):
                if queues.get(op.queue, {}).pop(op.message_id, None) is not None:
                    lost_a_reference.add(op.message_id)
            elif isinstance(op, SetDeliveryCount):
                if op.message_id in queues.get(op.queue, {}):
                    queues[op.queue][op.message_id] = op.delivery_count
        for message_id in lost_a_reference:
            if not any(message_id in refs for refs in queues.values()):
                stored.discard(message_id)
        self.gone |= self.messages - stored
        self.queues, self.messages = queues, stored
        return True

    def references(self) -> list[tuple[str, int]]:
        return [(name, message_id) for name, refs in sorted(self.queues.items())
                for message_id in sorted(refs)]


def draw_unit(data, model: Model) -> list:
    refs = model.references()
    kinds = ["send", "send", "create"]
    if refs:
        kinds += ["ack", "ack", "count", "move", "copy", "batch"]
    if model.queues:
        kinds += ["delete queue", "bad"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "create":
        return [PutQueue(queue(data.draw(st.sampled_from(QUEUE_NAMES)), "a"))]
    if kind == "send":
        message_id = model.next_id
        model.next_id += 1
        targets = data.draw(st.lists(st.sampled_from(sorted(model.queues) or ["q0"]),
                                     unique=True, max_size=3))
        return [AddMessage(message(message_id, "a")),
                *(AddReference(name, message_id) for name in targets)]
    if kind == "delete queue":
        return [DeleteQueue(data.draw(st.sampled_from(sorted(model.queues))))]
    if kind == "bad":
        message_id = model.next_id
        model.next_id += 1
        return [AddMessage(message(message_id, "a")), AddReference("missing", message_id)]
    if kind == "batch":
        return [op for _ in range(data.draw(st.integers(2, 3)))
                for op in _ref_op(data, refs, model)]
    return _ref_op(data, refs, model, kind)


def _ref_op(data, refs, model: Model, kind: str | None = None) -> list:
    kind = kind or data.draw(st.sampled_from(["ack", "count", "move", "copy"]))
    name, message_id = data.draw(st.sampled_from(refs))
    other = data.draw(st.sampled_from(QUEUE_NAMES))
    if kind == "ack":
        return [DeleteReference(name, message_id)]
    if kind == "count":
        return [SetDeliveryCount(name, message_id, data.draw(st.integers(1, 9)))]
    if kind == "move":  # dead-letter style, in either order
        ops = [DeleteReference(name, message_id), AddReference(other, message_id, 1)]
        return ops if data.draw(st.booleans()) else ops[::-1]
    # Copy a message to another queue: any message ever sent, so also one already gone (which
    # must fail, even when the unit that took its last reference is in the same group).
    message_id = data.draw(st.sampled_from(sorted({m for _, m in refs} | model.gone)))
    return [AddReference(other, message_id)]


@pytest.fixture
def migrated_url(store_url):
    schema.upgrade(store_url)
    return store_url


def _empty(engine) -> None:
    with engine.begin() as connection:
        for table in ("message_refs", "messages", "queues", "addresses"):
            connection.execute(text(f"DELETE FROM {table}"))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_grouped_commits_equal_units_applied_one_by_one(migrated_url, data):
    model = Model()
    units = [[PutQueue(queue(name, "a")) for name in QUEUE_NAMES[:3]]]
    expected = [model.apply(units[0])]
    for _ in range(data.draw(st.integers(1, 40), label="units")):
        unit = draw_unit(data, model)
        units.append(unit)
        expected.append(model.apply(unit))

    engine = make_engine(migrated_url)
    _empty(engine)
    post, entered, release = held_post()  # the rest of the units group

    journal = SqlJournal(engine, post)
    try:
        completions = Completions()
        journal.submit([], completions.done("gate"))
        assert entered.wait(10)
        for number, unit in enumerate(units):
            journal.submit(unit, completions.done(number))
        release.set()
        calls = completions.wait_for(len(units) + 1)[1:]

        assert [tag for tag, _ in calls] == list(range(len(units)))
        for (number, result), ok in zip(calls, expected):
            if ok:
                assert result is None, f"unit {number} {units[number]} failed: {result}"
            else:
                assert isinstance(result, Exception), f"unit {number} should have failed"
        with engine.connect() as connection:
            stored = set(connection.execute(select(messages.c.id)).scalars())
        assert stored == model.messages
        # Recovery sweeps messages no queue references (store.integrity): a unit the broker
        # submits never stores one, the drawn units can.
        recovered = journal.recover()
        got = [(name, r.message.id) for name, refs in sorted(recovered.references.items())
               for r in refs]
        assert got == model.references()
        counts = {(name, r.message.id): r.delivery_count
                  for name, refs in recovered.references.items() for r in refs}
        assert counts == {(name, m): c for name, refs in model.queues.items()
                          for m, c in refs.items()}
        assert sorted(q.name for q in recovered.queues) == sorted(model.queues)
        referenced = {m for refs in model.queues.values() for m in refs}
        with engine.connect() as connection:
            stored = set(connection.execute(select(messages.c.id)).scalars())
        assert stored == referenced
        assert recovered.next_message_id == max(referenced, default=0) + 1
    finally:
        release.set()
        journal.close()


def test_an_unknown_queue_is_a_clear_error(sqlite_url, open_store):
    journal = open_store(sqlite_url)
    completions = Completions()
    journal.submit([AddMessage(message(1)), AddReference("nowhere", 1)], completions.done(1))
    (_, error), = completions.wait_for(1)
    assert isinstance(error, UnknownQueue) and "nowhere" in str(error)
    with journal.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(messages)).scalar() == 0
