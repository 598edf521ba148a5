"""Group commits bigger than one multi-row statement (store.bulk), on both back-ends: every row
lands once, the Applier's ordering rules hold across flushes in the middle of a group, a replay
changes nothing, and a bad row still fails only its own unit."""
from __future__ import annotations


import psycopg
import pytest
from sqlalchemy.engine import make_url

from hermod.broker.core.ports import AddMessage, AddReference, DeleteReference, SetDeliveryCount
from hermod.store import SqlJournal, bulk, schema
from hermod.store.engine import make_engine
from store_testing import (Completions, held_post, message, queue, send, setup_ops,
                           submit_and_wait, table_counts)

# Not a multiple of the SQLite chunk: full chunks, then a padded one.
GROUP = bulk.SqliteBulk().chunk * 2 + 452


def held_writer(open_store, url: str):
    """A journal whose writer waits after its first commit until `release` is set, so that
    everything submitted meanwhile goes into one transaction."""
    post, entered, release = held_post()
    return open_store(url, post), entered, release


def submit_group(open_store, url: str, setup: list, units: list[list]):
    """`setup` committed alone, then `units` as one group; returns the journal and the
    completions of the units in order."""
    journal, entered, release = held_writer(open_store, url)
    completions = Completions()
    journal.submit(setup, completions.done("setup"))
    assert entered.wait(20)
    for n, unit in enumerate(units):
        journal.submit(unit, completions.done(n))
    release.set()
    calls = completions.wait_for(len(units) + 1)
    return journal, calls[1:]


def refs(journal) -> dict[str, list[tuple[int, int]]]:
    return {name: [(r.message.id, r.delivery_count) for r in references]
            for name, references in journal.recover().references.items()}


def test_a_group_of_several_chunks_stores_every_row_once(store_url, open_store):
    units = [send(n, "a", "b", address="news") for n in range(1, GROUP + 1)]
    units += [[DeleteReference("a", n)] for n in range(1, GROUP + 1, 2)]
    journal, calls = submit_group(open_store, store_url,
                                  setup_ops(queue("a", "news", "multicast"),
                                            queue("b", "news", "multicast")), units)

    assert calls == [(n, None) for n in range(len(units))]
    assert journal.stats().max_units_per_commit == len(units)  # one transaction
    stored = refs(journal)
    assert stored["a"] == [(n, 0) for n in range(2, GROUP + 1, 2)]
    assert stored["b"] == [(n, 0) for n in range(1, GROUP + 1)]
    assert table_counts(journal.engine)["messages"] == GROUP  # each still on b
    assert journal.recover().references["b"][-1].message == message(GROUP, "news")


def test_messages_go_with_their_last_reference_across_several_queues(store_url, open_store):
    names = ("a", "b", "c")
    sends = [send(n, *names, address="news") for n in range(1, GROUP + 1)]
    # Every message loses a and b; the first half loses c too, in the same group.
    acks = [[DeleteReference(name, n)] for name in ("a", "b") for n in range(1, GROUP + 1)]
    acks += [[DeleteReference("c", n)] for n in range(1, GROUP // 2 + 1)]
    journal, calls = submit_group(open_store, store_url,
                                  setup_ops(*(queue(q, "news", "multicast") for q in names)),
                                  sends + acks)

    assert all(error is None for _, error in calls)
    stored = refs(journal)
    assert stored["a"] == stored["b"] == []
    assert stored["c"] == [(n, 0) for n in range(GROUP // 2 + 1, GROUP + 1)]
    counts = table_counts(journal.engine)
    assert counts["messages"] == counts["message_refs"] == GROUP - GROUP // 2


def test_ordering_rules_hold_when_a_group_flushes_in_the_middle(store_url, open_store):
    last = GROUP
    units = [send(n, "a") for n in range(1, last + 1)]
    units += [[DeleteReference("a", n)] for n in range(1, 1501)]
    # A move (delete on a, add on b in one unit) keeps the message.
    units.append([DeleteReference("a", 1600), AddReference("b", 1600)])
    # Adding a reference whose delete is buffered flushes first: 1700 (still on b) is back on a.
    units.append([AddReference("b", 1700)])
    units.append([DeleteReference("a", 1700)])
    units.append([AddReference("a", 1700, delivery_count=4)])
    # Two counts for one key: the last one set wins; then a reference to a count's key.
    units.append([SetDeliveryCount("a", 1800, 3)])
    units.append([SetDeliveryCount("a", 1800, 5)])
    units.append([AddReference("a", 1800, delivery_count=9)])  # already there: no change
    units.append([DeleteReference("a", 1900), AddReference("b", 1900, delivery_count=2)])
    units.append([SetDeliveryCount("b", 1900, 7)])
    units.append([AddReference("b", 1800, delivery_count=1)])
    # More rows after the flushes, so that the group's last statements span chunks again.
    units += [send(n, "b") for n in range(last + 1, last + 1500)]
    units += [[DeleteReference("b", n)] for n in range(last + 1, last + 1100)]
    journal, calls = submit_group(open_store, store_url, setup_ops(queue("a"), queue("b")), units)

    assert calls == [(n, None) for n in range(len(units))]
    stored = refs(journal)
    assert stored["a"] == [(n, {1700: 4, 1800: 5}.get(n, 0)) for n in range(1501, last + 1)
                           if n not in (1600, 1900)]
    assert stored["b"] == [(1600, 0), (1700, 0), (1800, 1), (1900, 7),
                           *((n, 0) for n in range(last + 1100, last + 1500))]
    assert table_counts(journal.engine)["messages"] == (last - 1500) + 400


def test_replaying_a_committed_group_changes_nothing(store_url, open_store):
    # A commit that succeeded but whose outcome was lost with the connection is replayed.
    units = [send(n, "a") for n in range(1, GROUP + 1)]
    units += [[DeleteReference("a", n)] for n in range(1, GROUP // 2)]
    units += [[SetDeliveryCount("a", GROUP, 2)]]
    journal, _ = submit_group(open_store, store_url, setup_ops(queue("a")), units)
    before = (refs(journal), table_counts(journal.engine))
    completions = Completions()
    for n, unit in enumerate(units):
        journal.submit(unit, completions.done(n))
    assert completions.wait_for(len(units)) == [(n, None) for n in range(len(units))]
    assert (refs(journal), table_counts(journal.engine)) == before


def test_a_message_id_out_of_range_fails_its_unit_alone(store_url, open_store):
    units = [send(n, "a") for n in range(1, GROUP + 1)]
    bad = GROUP // 2
    units[bad] = [AddMessage(message(2**64, "a")), AddReference("a", 2**64)]
    units += [[DeleteReference("a", n)] for n in range(1, 11)]
    journal, calls = submit_group(open_store, store_url, setup_ops(queue("a")), units)

    assert [n for n, error in calls if error is not None] == [bad]
    assert [n for n, _ in refs(journal)["a"]] == [n for n in range(11, GROUP + 1)
                                                  if n != bad + 1]


def test_a_wrong_typed_field_fails_its_unit_alone_on_postgresql(pg_url, open_store):
    # SQLite stores what it is given (no STRICT tables); PostgreSQL refuses it.
    units = [send(n, "a") for n in range(1, 101)]
    units[40] = [AddMessage(message(41, "a", priority="high")), AddReference("a", 41)]
    journal, calls = submit_group(open_store, pg_url, setup_ops(queue("a")), units)

    assert [n for n, error in calls if error is not None] == [40]
    assert [n for n, _ in refs(journal)["a"]] == [n for n in range(1, 101) if n != 41]


def test_a_sqlite_library_too_old_for_the_bulk_statements_is_refused_in_one_line(tmp_path,
                                                                                  monkeypatch):
    import sqlite3

    from hermod import store
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(store.StoreError, match=r"^SQLite 3\.31\.1 is too old for the store: "
                                               r"3\.33 or newer is needed$"):
        store.open_journal(f"sqlite:///{tmp_path / 'hermod.db'}", None)


def test_a_commit_whose_outcome_is_lost_is_replayed_with_idempotent_inserts(store_url, open_store,
                                                                           monkeypatch):
    # First attempts use plain inserts (cheaper on PostgreSQL), which would refuse the rows the
    # lost commit did store; the retry after the outage must tolerate them.
    journal = open_store(store_url)
    assert submit_and_wait(journal, setup_ops(queue("a"))) is None
    dialect = journal.engine.dialect
    real_commit = dialect.do_commit
    lost: list[bool] = []

    def commit_then_lose_the_outcome(dbapi_connection) -> None:
        real_commit(dbapi_connection)
        if not lost:
            lost.append(True)
            raise dialect.loaded_dbapi.OperationalError("disk I/O error (test: outcome lost)")

    monkeypatch.setattr(dialect, "do_commit", commit_then_lose_the_outcome)
    completions = Completions()
    units = [send(n, "a") for n in range(1, 201)]
    for n, unit in enumerate(units):
        journal.submit(unit, completions.done(n))
    calls = completions.wait_for(len(units))
    assert sorted(calls) == [(n, None) for n in range(len(units))]
    assert lost == [True]
    assert refs(journal) == {"a": [(n, 0) for n in range(1, 201)]}
    assert table_counts(journal.engine)["messages"] == 200
    stats = journal.stats()
    assert stats.retries >= 1 and stats.idempotent_commits >= 1 and stats.failed_units == 0


def test_a_session_lost_before_the_copy_is_an_outage_not_a_fault(pg_url):
    # The first statement of a batch of sends is the binary COPY, which runs on the psycopg
    # session itself: its errors must be classified like any other statement's.
    schema.upgrade(pg_url)
    journal = SqlJournal(make_engine(pg_url), None)
    try:
        assert submit_and_wait(journal, setup_ops(queue("a"))) is None
        with psycopg.connect(make_url(pg_url).set(drivername="postgresql").render_as_string(
                hide_password=False), autocommit=True) as admin:
            gone = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                 " WHERE application_name = 'hermod'").fetchone()[0]
        assert gone == 1
        completions = Completions()
        for n in range(1, 51):
            journal.submit(send(n, "a"), completions.done(n))
        assert sorted(completions.wait_for(50)) == [(n, None) for n in range(1, 51)]
        assert refs(journal) == {"a": [(n, 0) for n in range(1, 51)]}
        assert journal.stats().retries >= 1 and journal.stats().failed_units == 0
    finally:
        journal.close()


def test_a_row_the_server_refuses_after_the_copy_commits_nothing_of_its_group(pg_url, open_store):
    # On PostgreSQL a first attempt is one query string: BEGIN, the COPY of the messages, the
    # references, ..., COMMIT (store.bulk.PostgresBulk.write_plain). A statement refused after
    # the COPY must leave the whole group uncommitted (the server skips the rest of the string,
    # COMMIT included); the group is then applied unit by unit, so only the faulty unit fails
    # and its message is not left behind without a reference.
    units = [send(n, "a") for n in range(1, 101)]
    units[60] = [AddMessage(message(61, "a")), AddReference("a", 61, delivery_count=2**31)]
    journal, calls = submit_group(open_store, pg_url, setup_ops(queue("a")), units)

    assert [n for n, error in calls if error is not None] == [60]
    assert "out of range" in str(calls[60][1])
    assert [n for n, _ in refs(journal)["a"]] == [n for n in range(1, 101) if n != 61]
    assert table_counts(journal.engine)["messages"] == 99
    assert journal.stats().idempotent_commits >= 1
