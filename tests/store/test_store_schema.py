"""Schema: migrations match the models, upgrades are repeatable, bad stores give one line."""
from __future__ import annotations

import sqlite3
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from hermod import store
from pgcluster import free_port
from hermod.store import (
    MemoryJournal,
    SchemaCorrupt,
    SchemaOutdated,
    SchemaTooNew,
    SqlJournal,
    StoreError,
    StoreUnreachable,
    schema,
)
from hermod.store.engine import make_engine, parse_url
from hermod.store.models import metadata
from store_testing import queue, setup_ops, submit_and_wait


def assert_one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message
    return message


def test_upgrade_twice_is_harmless(store_url):
    schema.upgrade(store_url)
    schema.upgrade(store_url)
    schema.check(store_url)
    assert schema.current_revision(store_url) == schema.head_revision()


def test_models_and_migrations_do_not_drift_apart(store_url):
    schema.upgrade(store_url)
    engine = make_engine(store_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_upgrade_keeps_stored_data(store_url, open_store):
    journal = open_store(store_url)
    submit_and_wait(journal, setup_ops(queue("orders")))
    journal.close()
    schema.upgrade(store_url)
    assert [q.name for q in open_store(store_url).recover().queues] == ["orders"]


def _stamp(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = :r"),
                               {"r": revision})
    finally:
        engine.dispose()


def test_a_schema_newer_than_this_code_is_refused_in_one_line(store_url):
    schema.upgrade(store_url)
    _stamp(store_url, "9999_from_the_future")

    for attempt in (lambda: store.open_journal(store_url, None), lambda: schema.check(store_url),
                    lambda: schema.upgrade(store_url)):
        with pytest.raises(SchemaTooNew) as caught:
            attempt()
        message = assert_one_line(caught.value)
        assert "9999_from_the_future" in message and "newer" in message


def test_a_missing_table_is_reported_as_corrupt(store_url):
    schema.upgrade(store_url)
    engine = make_engine(store_url)
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE message_refs"))
    engine.dispose()

    with pytest.raises(SchemaCorrupt) as caught:
        store.open_journal(store_url, None)
    assert "message_refs" in assert_one_line(caught.value)


def test_tables_without_a_revision_are_reported_as_corrupt(store_url):
    schema.upgrade(store_url)
    engine = make_engine(store_url)
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE alembic_version"))
    engine.dispose()

    with pytest.raises(SchemaCorrupt) as caught:
        schema.upgrade(store_url)
    assert "alembic_version" in assert_one_line(caught.value)


def test_an_empty_database_needs_an_upgrade(store_url):
    with pytest.raises(SchemaOutdated) as caught:
        schema.check(store_url)
    assert "hermod db upgrade" in assert_one_line(caught.value)


def test_a_corrupt_sqlite_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "hermod.db"
    path.write_bytes(b"this is not an SQLite database, just some bytes\n" * 200)

    with pytest.raises(SchemaCorrupt) as caught:
        store.open_journal(f"sqlite:///{path}", None)
    message = assert_one_line(caught.value)
    assert str(path) in message and "not a valid SQLite database" in message


def test_a_damaged_sqlite_page_is_refused_in_one_line(tmp_path):
    path = tmp_path / "hermod.db"
    url = f"sqlite:///{path}"
    schema.upgrade(url)
    with sqlite3.connect(path) as connection:  # fold the WAL back into the main file
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page
    path.write_bytes(bytes(data))

    with pytest.raises(StoreError) as caught:
        store.open_journal(url, None)
    assert isinstance(caught.value, SchemaCorrupt)
    assert_one_line(caught.value)


def test_an_unreachable_postgresql_is_reported_in_one_line():
    url = f"postgresql+psycopg://nobody:secret@127.0.0.1:{free_port()}/hermod"
    started = time.monotonic()
    with pytest.raises(StoreUnreachable) as caught:
        store.open_journal(url, None)
    message = assert_one_line(caught.value)
    assert "unreachable" in message and "secret" not in message
    assert time.monotonic() - started < 10


def test_relative_sqlite_urls_resolve_against_the_working_directory(tmp_path, monkeypatch,
                                                                    open_store):
    monkeypatch.chdir(tmp_path)
    journal = open_store("sqlite:///hermod-data/sub/hermod.db")
    assert isinstance(journal, SqlJournal)
    assert (tmp_path / "hermod-data" / "sub" / "hermod.db").is_file()
    assert parse_url("sqlite:///x/y.db").database == str(tmp_path / "x" / "y.db")
    assert parse_url("sqlite:////abs/y.db").database == "/abs/y.db"


@pytest.mark.parametrize("mode, level", [("FULL", 2), ("NORMAL", 1)])
def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_the_chosen_sync(sqlite_url, mode, level):
    engine = make_engine(sqlite_url, sqlite_synchronous=mode)
    try:
        with engine.connect() as connection:
            pragma = lambda name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
            assert pragma("journal_mode") == "wal"
            assert pragma("synchronous") == level
            assert pragma("foreign_keys") == 1
    finally:
        engine.dispose()


def test_an_unknown_sqlite_sync_mode_is_refused(sqlite_url):
    with pytest.raises(StoreError, match="synchronous"):
        store.open_journal(sqlite_url, None, sqlite_synchronous="OFF")


def test_a_postgresql_url_without_driver_means_psycopg(pg_url):
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    assert parse_url(plain).drivername == "postgresql+psycopg"
    schema.upgrade(plain)
    schema.check(pg_url)


def test_unsupported_urls_are_refused_in_one_line():
    for url in ("mysql://u@h/db", "not a url"):
        with pytest.raises(StoreError) as caught:
            store.open_journal(url, None)
        assert_one_line(caught.value)


def test_memory_store_keeps_nothing_and_completes_at_once():
    posted = []
    journal = store.open_journal("memory", lambda callback, *args: posted.append((callback, args)))
    assert isinstance(journal, MemoryJournal) and journal.durable is False
    results = []
    journal.submit(setup_ops(queue("orders")), results.append)
    journal.read_page("orders", 0, 10, results.append)
    for callback, args in posted:
        callback(*args)
    assert results == [None, []]
    recovered = journal.recover()
    assert (recovered.queues, recovered.references, recovered.next_message_id) == ([], {}, 1)
    journal.close()

    inline = MemoryJournal()
    inline.submit([], results.append)
    assert results[-1] is None
