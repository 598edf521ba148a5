"""The references' integrity without foreign keys (revision 0005, store.integrity): a queue's
deletion takes its references and unshared messages in bounded chunks, recovery sweeps
leftovers, and a store at 0004 migrates (and back) with its data intact."""
from __future__ import annotations

from alembic import command
from sqlalchemy import event, inspect, text

from hermod.broker.core.ports import AddMessage, AddReference, DeleteQueue, DeleteReference
from hermod.store import UnknownMessage, schema
from hermod.store.engine import make_engine
from hermod.store.integrity import QUEUE_DELETE_CHUNK
from store_testing import (Completions, held_post, message, queue, send, setup_ops,
                           submit_and_wait, table_counts)

DEPTH = 10_000
SHARED = 100  # of the DEPTH messages, the first SHARED are on a second queue too


def _fill(journal) -> None:
    assert submit_and_wait(journal, setup_ops(queue("big"), queue("other"))) is None
    ops: list = []
    for message_id in range(1, DEPTH + 1):
        ops.append(AddMessage(message(message_id, "big")))
        ops.append(AddReference("big", message_id))
        if message_id <= SHARED:
            ops.append(AddReference("other", message_id))
    assert submit_and_wait(journal, ops) is None


def _orphans(engine) -> dict[str, int]:
    """Rows that break the invariants store.integrity keeps."""
    queries = {
        "refs_without_queue": "SELECT count(*) FROM message_refs r WHERE NOT EXISTS"
                              " (SELECT 1 FROM queues q WHERE q.id = r.queue_id)",
        "refs_without_message": "SELECT count(*) FROM message_refs r WHERE NOT EXISTS"
                                " (SELECT 1 FROM messages m WHERE m.id = r.message_id)",
        "messages_without_ref": "SELECT count(*) FROM messages m WHERE NOT EXISTS"
                                " (SELECT 1 FROM message_refs r WHERE r.message_id = m.id)",
    }
    with engine.connect() as connection:
        return {name: connection.execute(text(sql)).scalar() for name, sql in queries.items()}


NO_ORPHANS = {"refs_without_queue": 0, "refs_without_message": 0, "messages_without_ref": 0}


def test_deleting_a_queue_of_10k_takes_its_refs_and_unshared_messages_in_chunks(store_url,
                                                                                 open_store):
    journal = open_store(store_url)
    _fill(journal)
    statements: list[tuple[str, int]] = []

    @event.listens_for(journal.engine, "before_cursor_execute")
    def _record(_conn, _cursor, statement, parameters, _context, _many):
        if statement.lstrip().upper().startswith("DELETE FROM MESSAGE"):
            size = len(parameters) if isinstance(parameters, (tuple, list, dict)) else 0
            statements.append((statement.split(" WHERE")[0], size))

    assert submit_and_wait(journal, [DeleteQueue("big")]) is None
    counts = table_counts(journal.engine)
    assert counts["queues"] == 1
    assert counts["message_refs"] == SHARED and counts["messages"] == SHARED
    assert _orphans(journal.engine) == NO_ORPHANS
    ref_deletes = [size for sql, size in statements if "message_refs" in sql]
    assert len(ref_deletes) == DEPTH // QUEUE_DELETE_CHUNK
    assert max(ref_deletes) <= QUEUE_DELETE_CHUNK + 1  # the chunk's ids and the queue id
    journal.close()
    recovered = open_store(store_url).recover()
    assert [q.name for q in recovered.queues] == ["other"]
    assert [r.message.id for r in recovered.references["other"]] == list(range(1, SHARED + 1))


def test_a_reference_to_a_missing_message_fails_its_unit_alone(store_url, open_store):
    # What the foreign key to messages refused before 0005; in a group, the other units commit.
    post, entered, release = held_post()
    journal = open_store(store_url, post)
    completions = Completions()
    journal.submit(setup_ops(queue("a"), queue("b")), completions.done("setup"))
    assert entered.wait(10)
    journal.submit(send(1, "a"), completions.done("send"))
    journal.submit([AddReference("b", 1)], completions.done("copy"))  # stored: fine
    journal.submit([AddReference("b", 404)], completions.done("dangling"))
    journal.submit([DeleteReference("a", 1), AddReference("a", 2)], completions.done("mixed"))
    journal.submit(send(3, "a"), completions.done("later"))
    release.set()
    calls = dict(completions.wait_for(6))
    assert [name for name, error in calls.items() if error is not None] == ["dangling", "mixed"]
    assert isinstance(calls["dangling"], UnknownMessage) and "404" in str(calls["dangling"])
    refs = {name: [r.message.id for r in found]
            for name, found in journal.recover().references.items()}
    assert refs == {"a": [1, 3], "b": [1]}
    assert _orphans(journal.engine) == NO_ORPHANS


def test_recovery_sweeps_what_a_crash_between_the_deletes_would_leave(store_url, open_store):
    """The store's own units are atomic; this is the state a store left half-deleted by other
    means would have (references gone but not their messages, references to a queue or a
    message that is gone). Recovery removes exactly those and keeps everything reachable."""
    journal = open_store(store_url)
    _fill(journal)
    journal.close()
    engine = make_engine(store_url)
    try:
        with engine.begin() as connection:
            big = connection.execute(text("SELECT id FROM queues WHERE name = 'big'")).scalar()
            # "big" lost its references above 5,000 but not their messages ...
            connection.execute(text("DELETE FROM message_refs WHERE queue_id = :q AND"
                                    " message_id > 5000"), {"q": big})
            # ... a reference names a queue that is gone, another a message that is gone.
            connection.execute(text("INSERT INTO message_refs (queue_id, message_id,"
                                    " delivery_count) VALUES (:q, 1, 0), (:q, 999999, 0)"),
                               {"q": big + 1000})
            connection.execute(text("INSERT INTO message_refs (queue_id, message_id,"
                                    " delivery_count) VALUES (:q, 999998, 0)"), {"q": big})
        assert _orphans(engine) == {"refs_without_queue": 2, "refs_without_message": 2,
                                    "messages_without_ref": DEPTH - 5000}
    finally:
        engine.dispose()
    reopened = open_store(store_url)
    recovered = reopened.recover()
    assert [r.message.id for r in recovered.references["big"]] == list(range(1, 5001))
    assert [r.message.id for r in recovered.references["other"]] == list(range(1, SHARED + 1))
    assert _orphans(reopened.engine) == NO_ORPHANS
    assert table_counts(reopened.engine)["messages"] == 5000
    assert table_counts(reopened.engine)["message_refs"] == 5000 + SHARED


def test_a_store_at_0004_migrates_to_no_foreign_keys_and_back_with_its_data(store_url):
    config = schema.alembic_config(store_url)
    command.upgrade(config, "0004")
    engine = make_engine(store_url)
    try:
        assert len(inspect(engine).get_foreign_keys("message_refs")) == 2
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO queues (name, address, routing_type, max_consumers, exclusive,"
                " auto_created, purpose, extra) VALUES ('kept', 'kept', 'anycast', -1, false,"
                " false, 'queue', '{}')"))
            kept = connection.execute(text("SELECT id FROM queues")).scalar()
            for message_id in (7, 8, 9):
                connection.execute(text(
                    "INSERT INTO messages (id, address, priority, expiration, scheduled_time,"
                    " arrival, encoded) VALUES (:m, 'kept', 4, 0, 0, 1, :body)"),
                    {"m": message_id, "body": f"body {message_id}".encode()})
                connection.execute(text("INSERT INTO message_refs (queue_id, message_id,"
                                        " delivery_count) VALUES (:q, :m, :m)"),
                                   {"q": kept, "m": message_id})
        schema.upgrade(store_url)
        schema.check(store_url)
        engine.dispose()
        assert inspect(engine).get_foreign_keys("message_refs") == []
        assert table_counts(engine) == {"addresses": 0, "queues": 1, "messages": 3,
                                        "message_refs": 3}
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:
                sql = connection.execute(text("SELECT sql FROM sqlite_master WHERE"
                                              " name = 'message_refs'")).scalar()
            assert "WITHOUT ROWID" in sql
        assert {ix["name"] for ix in inspect(engine).get_indexes("message_refs")} == {
            "ix_message_refs_message_id"}
        # Downgrading drops what the foreign keys would refuse, then adds them back.
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO message_refs (queue_id, message_id,"
                                    " delivery_count) VALUES (:q, 7, 0)"), {"q": kept + 1})
        command.downgrade(config, "0004")
        engine.dispose()
        assert len(inspect(engine).get_foreign_keys("message_refs")) == 2
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT r.message_id, r.delivery_count, m.encoded FROM message_refs r JOIN"
                " messages m ON m.id = r.message_id ORDER BY r.message_id")).all()
        assert [(m, n, bytes(body)) for m, n, body in rows] == [
            (m, m, f"body {m}".encode()) for m in (7, 8, 9)]
    finally:
        engine.dispose()
