"""The store lock (contract, "High availability and bridges"): every broker holds its store's
lock while it runs; a second `hermod run` on the same store exits 2 with one stderr line naming
the holder, before it changes anything in the store; a SIGKILLed holder leaves no stale lock."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from hermod import store
from store_testing import queue, setup_ops, submit_and_wait

TIMEOUT_S = 30


def second_broker(store_url: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", store_url],
                          cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))


def store_rows(store_url: str) -> dict:
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            return {table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar()
                    for table in ("addresses", "queues", "messages", "alembic_version")}
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_second_broker_on_the_same_store_exits_2_naming_the_holder(backend, request,
                                                                      start_broker, tmp_path):
    store_url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    first = start_broker(store=store_url)
    before = store_rows(store_url)

    refused = second_broker(store_url, tmp_path)

    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "in use by another broker" in lines[0]
    assert f"{socket.gethostname()} pid {first.proc.pid}" in lines[0]
    assert refused.stdout == ""  # never ready, never listening
    assert store_rows(store_url) == before
    assert first.proc.poll() is None  # the holder goes on serving


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_sigkilled_holder_leaves_no_stale_lock(backend, request, start_broker, tmp_path):
    store_url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    first = start_broker(store=store_url)
    first.kill()

    second = start_broker(store=store_url)  # ready: it took the lock

    refused = second_broker(store_url, tmp_path)
    assert refused.returncode == 2
    assert f"pid {second.proc.pid}" in refused.stderr


def test_a_journal_releases_the_lock_when_closed(store_url):
    journal = store.open_journal(store_url, None, holder="node-a")
    with pytest.raises(store.StoreLocked, match="in use by another broker: node-a"):
        store.open_journal(store_url, None)
    journal.close()
    again = store.open_journal(store_url, None)
    again.close()


def test_a_postgresql_broker_takes_the_lock_again_after_a_server_restart(private_pg_cluster):
    url = private_pg_cluster.create_database("relock")
    journal = store.open_journal(url, None, holder="node-a", fail_after_s=60)
    try:
        submit_and_wait(journal, setup_ops(queue("orders")))
        private_pg_cluster.stop()
        private_pg_cluster.start()
        # The restart ended the lock's session; the next unit reconnects and relocks first.
        submit_and_wait(journal, setup_ops(queue("invoices")))
        with pytest.raises(store.StoreLocked, match="node-a"):
            store.open_journal(url, None)
    finally:
        journal.close()
