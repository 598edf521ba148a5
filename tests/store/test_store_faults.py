"""PostgreSQL going away mid-run: durable work waits (never a false accept) and resumes, or is
rejected clearly after `fail_after_s`. Each test has a cluster of its own to stop and start."""
from __future__ import annotations

import logging
import time

from hermod.store import StoreUnavailable
from store_testing import Completions, queue, send, setup_ops, submit_and_wait, wait_until


def test_units_wait_while_postgresql_is_down_and_complete_after_restart(
        private_pg_cluster, open_store, caplog):
    url = private_pg_cluster.create_database("outage")
    journal = open_store(url, fail_after_s=60)
    submit_and_wait(journal, setup_ops(queue("orders")))
    submit_and_wait(journal, send(1, "orders"))

    private_pg_cluster.stop()
    completions = Completions()
    with caplog.at_level(logging.WARNING, logger="store"):
        for n in range(2, 12):
            journal.submit(send(n, "orders"), completions.done(n))
        wait_until(lambda: journal.stats().retries >= 2, what="retries against the stopped server")
        assert completions.count() == 0  # producers wait: nothing was accepted

        private_pg_cluster.start()
        calls = completions.wait_for(10)

    assert calls == [(n, None) for n in range(2, 12)]
    unreachable = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(unreachable) == 1  # one warning per outage, not one per retry
    assert any("reachable again" in r.getMessage() for r in caplog.records)
    stats = journal.stats()
    assert stats.outages == 1 and stats.expired_units == 0
    recovered = journal.recover()
    assert [r.message.id for r in recovered.references["orders"]] == list(range(1, 12))


def test_units_are_rejected_after_fail_after_s_and_the_journal_resumes(private_pg_cluster,
                                                                        open_store):
    url = private_pg_cluster.create_database("outage")
    journal = open_store(url, fail_after_s=0.5)
    submit_and_wait(journal, setup_ops(queue("orders")))

    private_pg_cluster.stop()
    completions = Completions()
    started = time.monotonic()
    for n in (1, 2, 3):
        journal.submit(send(n, "orders"), completions.done(n))
    calls = completions.wait_for(3)
    assert time.monotonic() - started >= 0.5
    assert [tag for tag, _ in calls] == [1, 2, 3]
    for _, error in calls:
        assert isinstance(error, StoreUnavailable)
        assert "unreachable" in str(error) and "\n" not in str(error)

    private_pg_cluster.start()
    assert submit_and_wait(journal, send(4, "orders")) is None
    recovered = journal.recover()
    assert [r.message.id for r in recovered.references["orders"]] == [4]  # 1-3 never applied
    assert journal.stats().expired_units == 3


def test_a_page_read_waits_for_the_database_too(private_pg_cluster, open_store):
    url = private_pg_cluster.create_database("outage")
    journal = open_store(url)
    submit_and_wait(journal, setup_ops(queue("orders")))
    submit_and_wait(journal, send(1, "orders"))

    private_pg_cluster.stop()
    completions = Completions()
    journal.read_page("orders", 0, 10, completions.done("page"))
    wait_until(lambda: journal.stats().retries >= 2, what="retries against the stopped server")
    assert completions.count() == 0

    private_pg_cluster.start()
    (tag, page), = completions.wait_for(1)
    assert [r.message.id for r in page] == [1]


def test_close_during_an_outage_rejects_what_waits_and_returns(private_pg_cluster, open_store):
    url = private_pg_cluster.create_database("outage")
    journal = open_store(url, fail_after_s=0.5)
    submit_and_wait(journal, setup_ops(queue("orders")))

    private_pg_cluster.stop()
    completions = Completions()
    journal.submit(send(1, "orders"), completions.done("send"))
    journal.read_page("orders", 0, 10, completions.done("page"))
    journal.close()  # bounded by fail_after_s: nothing is left waiting

    calls = dict(completions.wait_for(2, timeout=0))
    assert isinstance(calls["send"], StoreUnavailable)
    assert calls["page"] == []


def test_a_restart_between_commits_is_not_an_outage(private_pg_cluster, open_store, caplog):
    url = private_pg_cluster.create_database("outage")
    journal = open_store(url)
    submit_and_wait(journal, setup_ops(queue("orders")))
    private_pg_cluster.stop()
    private_pg_cluster.start()  # the writer's idle connection is now dead

    with caplog.at_level(logging.WARNING, logger="store"):
        assert submit_and_wait(journal, send(1, "orders")) is None
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert journal.stats().outages == 0
