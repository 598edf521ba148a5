"""Queue ownership among several live brokers on one PostgreSQL (docs/scale-out.md, section 1):
one owner per queue while its node lease runs on the database's clock, takeover of a dead
member's queues, and the fence: a takeover waits for the old owner's commit in flight, and the
old owner commits nothing afterwards."""
from __future__ import annotations

import threading

import psycopg
import pytest
from sqlalchemy import text

from hermod.store import StoreUnreachable
from hermod.store.engine import make_engine
from hermod.store.ownership import Membership, NodeNameTaken, OwnershipLost
from hermod_testing import wait_for
from pgcluster import free_port

SHORT_LEASE_S = 1.0
LONG_LEASE_S = 60.0


def member(engines, url, node, lease_s=LONG_LEASE_S):
    membership = Membership(engines(url), "test", node, lease_s, announce=f"amqp://{node}:5672")
    membership.join()
    return membership


def sql(cluster, database, query, *args):
    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        cursor = connection.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def test_one_owner_per_queue_while_it_lives(scale_db, engines):
    url = scale_db[2]
    a, b = member(engines, url, "node-a"), member(engines, url, "node-b")
    assert a.claim("orders") == 1
    assert a.claim("orders") == 1  # ours already: same epoch
    assert b.claim("orders") is None
    owner = b.owner("orders")
    assert (owner.node, owner.announce, owner.epoch) == ("node-a", "amqp://node-a:5672", 1)
    assert b.claim("invoices") == 1
    assert a.owned() == ["orders"] and b.owned() == ["invoices"]
    assert a.orphans() == [] and set(a.live_nodes()) == {"node-a", "node-b"}


def test_concurrent_claims_leave_exactly_one_owner_per_queue(scale_db, engines):
    url = scale_db[2]
    members = [member(engines, url, f"node-{n}") for n in range(3)]
    queues = [f"q{n:02d}" for n in range(20)]
    results: dict[str, list[tuple[str, int | None]]] = {q: [] for q in queues}
    errors: list[BaseException] = []

    def claim_all(membership: Membership) -> None:
        try:
            for q in queues:
                results[q].append((membership.node, membership.claim(q)))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=claim_all, args=(m,)) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for q in queues:
        winners = [node for node, epoch in results[q] if epoch is not None]
        assert len(winners) == 1 and [e for _, e in results[q] if e is not None] == [1], q
        assert members[0].owner(q).node == winners[0]
    assert sorted(q for m in members for q in m.owned()) == queues


def test_a_dead_members_queues_are_taken_over_with_a_new_epoch(scale_db, engines):
    url = scale_db[2]
    a = member(engines, url, "node-a", SHORT_LEASE_S)
    b = member(engines, url, "node-b")
    assert a.claim("orders") == 1 and a.claim("invoices") == 1
    # node-a stops renewing (killed): its lease runs out on the database's clock.
    wait_for(lambda: b.owner("orders") is None, 10, message="node-a's lease to expire")
    assert b.orphans() == ["invoices", "orders"] and set(b.live_nodes()) == {"node-b"}
    assert b.claim("orders") == 2 and b.claim("invoices") == 2
    assert b.owner("orders").node == "node-b"
    # node-a wakes up: it can neither renew, nor claim, nor commit.
    assert a.renew() is False
    with pytest.raises(OwnershipLost, match="no longer a live member"):
        a.claim("payments")
    with a._engine.begin() as connection, pytest.raises(OwnershipLost):
        a.check(connection, ["orders"])


def test_a_takeover_waits_for_the_old_owners_commit_in_flight(scale_db, engines):
    cluster, database, url = scale_db
    a = member(engines, url, "node-a", SHORT_LEASE_S)
    b = member(engines, url, "node-b")
    assert a.claim("orders") == 1
    connection = a._engine.connect()
    transaction = connection.begin()
    a.check(connection, ["orders"])  # the fence passed; the commit is in flight
    connection.execute(text("INSERT INTO duplicate_ids (address, duplicate_id, seq)"
                            " VALUES ('orders', 'in-flight', 1)"))
    wait_for(lambda: b.owner("orders") is None, 10, message="node-a's lease to expire")

    claimed: list[object] = []
    claimer = threading.Thread(target=lambda: claimed.append(b.claim("orders")))
    claimer.start()
    wait_for(lambda: sql(cluster, database, "SELECT count(*) FROM pg_stat_activity"
                         " WHERE datname = %s AND wait_event_type = 'Lock'", database)[0][0] == 1,
             5, message="node-b's claim to wait for node-a's commit")
    assert claimed == []
    transaction.commit()
    connection.close()
    claimer.join(10)
    assert claimed == [2]
    # What node-b recovers includes node-a's last commit.
    assert sql(cluster, database, "SELECT duplicate_id FROM duplicate_ids") == [("in-flight",)]
    with a._engine.begin() as late, pytest.raises(OwnershipLost):
        a.check(late, ["orders"])


def test_a_live_member_that_lost_a_queue_cannot_commit_to_it(scale_db, engines):
    url = scale_db[2]
    a, b = member(engines, url, "node-a"), member(engines, url, "node-b")
    assert a.claim("orders") == 1 and a.claim("invoices") == 1
    assert a.release("orders") is True and a.release("orders") is False
    assert b.claim("orders") == 2  # no wait for any expiry: it was released
    with a._engine.begin() as connection:
        a.check(connection, ["invoices"])  # still ours
        with pytest.raises(OwnershipLost, match="no longer owns orders;"):
            a.check(connection, ["invoices", "orders"])


def test_leaving_frees_every_queue_at_once(scale_db, engines):
    url = scale_db[2]
    a, b = member(engines, url, "node-a"), member(engines, url, "node-b")
    assert a.claim("orders") == 1 and a.claim("invoices") == 1
    a.leave()
    assert b.orphans() == ["invoices", "orders"] and set(b.live_nodes()) == {"node-b"}
    assert b.claim("orders") == 2


def test_a_node_name_is_one_live_process_at_a_time(scale_db, engines):
    url = scale_db[2]
    first = member(engines, url, "node-a")
    second = Membership(engines(url), "test", "node-a", LONG_LEASE_S)
    with pytest.raises(NodeNameTaken) as refused:
        second.join()
    assert first.holder in str(refused.value) and "\n" not in str(refused.value)
    first.leave()
    second.join()
    assert second.claim("orders") == 1


def test_an_unreachable_database_is_one_line(engines):
    engine = make_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nowhere"
                         "?connect_timeout=2")
    try:
        with pytest.raises(StoreUnreachable) as caught:
            Membership(engine, "nowhere", "node-a", LONG_LEASE_S).join()
    finally:
        engine.dispose()
    assert "\n" not in str(caught.value) and "nowhere" in str(caught.value)


def test_a_paused_owner_mid_transaction_does_not_hold_a_takeover_back(scale_db, engines):
    url = scale_db[2]
    a = member(engines, url, "node-a", SHORT_LEASE_S)
    journal_engine = engines(url)
    a.guard(journal_engine)  # the journal's sessions, as a broker would set them up
    b = member(engines, url, "node-b")
    assert a.claim("orders") == 1
    connection = journal_engine.connect()
    transaction = connection.begin()
    a.check(connection, ["orders"])  # then node-a is SIGSTOPped inside its commit
    wait_for(lambda: b.owner("orders") is None, 10, message="node-a's lease to expire")
    assert wait_for(lambda: b.claim("orders"), 10, message="node-b to take orders") == 2
    with pytest.raises(Exception, match="idle-in-transaction|terminat|closed"):
        connection.execute(text("SELECT 1"))
        transaction.commit()
    connection.invalidate()


def test_owner_changes_are_announced_to_listening_members(scale_db, engines):
    """pg_notify at claim, release and leave: a listening member hears the queue's name when
    the change commits (EVERY_QUEUE first, and for a leave), not a renew period later."""
    url = scale_db[2]
    a, b = member(engines, url, "node-a"), member(engines, url, "node-b")
    heard: list[set[str]] = []
    stop = threading.Event()
    listener = threading.Thread(target=a.listen, args=(stop, heard.append, 0.2), daemon=True)
    listener.start()
    try:
        wait_for(lambda: heard == [{"*"}], 10, message="the listener's first catch-up")
        assert b.claim("orders") == 1
        wait_for(lambda: any("orders" in names for names in heard[1:]), 10,
                 message="node-b's claim heard")
        assert a.owners_view() == (frozenset(), {"orders": ("node-b", "amqp://node-b:5672")})
        heard.clear()
        assert b.release("orders")
        wait_for(lambda: {"orders"} in heard, 10, message="node-b's release heard")
        heard.clear()
        b.leave()
        wait_for(lambda: {"*"} in heard, 10, message="node-b's leave heard")
    finally:
        stop.set()
        listener.join(10)
    assert not listener.is_alive()
