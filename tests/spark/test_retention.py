"""Retention purge: rows older than their address's `retention_days` go (with their
acknowledgement records), in the background, on SQLite and PostgreSQL; younger rows and
addresses without retention keep theirs."""
from __future__ import annotations

import time

from sqlalchemy import insert

from hermod import store
from hermod.broker.config import parse
from hermod.broker.core.settings import SettingsRepository
from hermod.broker.retention import DAY_MS, purge, retention_configured, start_purger
from hermod_testing import wait_for
from spark_helpers import RETENTION, send_bodies, table_rows
from hermod.store.engine import make_engine
from hermod.store.models import acknowledgements, retained_messages

SETTINGS = [("pipe.#", {"retention_days": 7}), ("pipe.short", {"retention_days": 1}),
            ("pipe.off", {"retention_days": 0})]


def fill(url: str, now_ms: int) -> None:
    """Rows of several ages on several addresses, each with one acknowledgement."""
    rows = []
    for address in ("pipe.long", "pipe.short", "pipe.off", "elsewhere"):
        for days in (0, 2, 8):
            rows.append({"address": address, "arrival": now_ms - days * DAY_MS - 1000})
    engine = make_engine(url)
    with engine.begin() as c:
        for i, row in enumerate(rows, start=1):
            c.execute(insert(retained_messages).values(
                message_id=i, address=row["address"], routing_type="anycast", priority=4,
                arrival=row["arrival"], encoded=b"\x00\x53\x77\xa1\x01x"))
            c.execute(insert(acknowledgements).values(message_id=i, queue=row["address"],
                                                      at=row["arrival"] + 5))
    engine.dispose()


def ages(url: str) -> set[tuple[str, int]]:
    now = int(time.time() * 1000)
    return {(r.address, (now - r.arrival) // DAY_MS) for r in table_rows(url, retained_messages)}


def test_purge_removes_rows_older_than_each_addresses_retention(store_url):
    store.schema.upgrade(store_url)
    now = int(time.time() * 1000)
    fill(store_url, now)
    engine = make_engine(store_url)
    try:
        result = purge(engine, SettingsRepository(SETTINGS), now)
    finally:
        engine.dispose()
    assert (result.messages, result.acknowledgements) == (3, 3)
    assert ages(store_url) == {
        ("pipe.long", 0), ("pipe.long", 2),          # 7 days: the 8-day-old row went
        ("pipe.short", 0),                           # 1 day: 2 and 8 days old went
        ("pipe.off", 0), ("pipe.off", 2), ("pipe.off", 8),  # retention off: rows are kept
        ("elsewhere", 0), ("elsewhere", 2), ("elsewhere", 8)}  # no setting: kept
    remaining = {r.message_id for r in table_rows(store_url, retained_messages)}
    assert {a.message_id for a in table_rows(store_url, acknowledgements)} == remaining


def test_purger_starts_only_when_a_database_store_retains(sqlite_store):
    assert not retention_configured(parse({}).address_settings)
    cfg = parse({"store": {"url": "memory"}, "address_settings": [{"match": "#", "retention_days": 3}]})
    assert retention_configured(cfg.address_settings)
    assert start_purger(cfg) is None
    store.schema.upgrade(sqlite_store)
    cfg = parse({"store": {"url": sqlite_store},
                 "address_settings": [{"match": "#", "retention_days": 3}]})
    purger = start_purger(cfg, interval_s=0.05)
    try:
        wait_for(lambda: purger.passes >= 2, timeout=10)  # runs again and again, quietly
    finally:
        purger.stop()


def test_the_broker_purges_expired_rows_in_the_background(sqlite_store, start_broker):
    b = start_broker(store=sqlite_store, config=RETENTION)
    send_bodies(b.url, "pipe.kept", ["new"])
    assert b.stop() == 0
    now = int(time.time() * 1000)
    engine = make_engine(sqlite_store)
    with engine.begin() as c:
        c.execute(insert(retained_messages).values(
            message_id=10_000, address="pipe.kept", routing_type="anycast", priority=4,
            arrival=now - 30 * DAY_MS, encoded=b"\x00\x53\x77\xa1\x03old"))
    engine.dispose()
    assert len(table_rows(sqlite_store, retained_messages)) == 2

    start_broker(store=sqlite_store, config=RETENTION)
    wait_for(lambda: len(table_rows(sqlite_store, retained_messages)) == 1, timeout=15)
    assert [r.address for r in table_rows(sqlite_store, retained_messages)] == ["pipe.kept"]
