"""Management creates and deletes addresses and queues, and purges queues, and answers once
the store has the change (as Artemis answers once its journal has it): the answer survives a
SIGKILL. While the store is away (SQLite locked by another connection) the answer waits;
past the store's give-up time it is a 503 "store failed", over HTTP and over AMQP."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from proton import Message

from durable_clients import HeldSqlite, StoreView, receive_exactly
from hermod.broker.tools.clients import ManagementCallError, management_call
from hermod_testing import wait_for
from http_helpers import call, http_url, send

ADDRESS = """
[[address]]
name = "orders"
routing = ["anycast"]
"""


@pytest.fixture
def held(tmp_path):
    store = HeldSqlite(tmp_path)
    yield store
    store.start()


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def queue_names(base: str) -> set[str]:
    status, rows = call(base, "GET", "/api/queues")
    assert status == 200, rows
    return {row["name"] for row in rows}


def test_a_queue_deleted_over_http_is_answered_once_stored_and_stays_deleted_after_a_kill(
        held, pool, start_broker):
    broker = start_broker(config=ADDRESS, store=held.url)
    base = http_url(broker)
    assert call(base, "POST", "/api/queues", {"name": "orders.q", "address": "orders"})[0] == 201
    send(broker.url, "orders", *(Message(body=f"m{n}", durable=True) for n in range(3)))
    held.stop()
    deleting = pool.submit(call, base, "DELETE", "/api/queues/orders.q")
    # The broker has deleted it (its list says so), the store has not: no answer yet.
    wait_for(lambda: "orders.q" not in queue_names(base), message="the queue gone from the broker")
    assert not deleting.done()
    held.start()
    assert deleting.result(timeout=10) == (204, None)
    with StoreView(held.url) as store:
        assert "orders.q" not in store.queue_names()  # stored before the answer, not after it

    broker.kill()
    broker = start_broker(config=ADDRESS, store=held.url)
    assert "orders.q" not in queue_names(http_url(broker))


def test_a_queue_created_over_http_is_answered_once_stored_and_is_there_after_a_kill(
        held, pool, start_broker):
    broker = start_broker(config=ADDRESS, store=held.url)
    base = http_url(broker)
    held.stop()
    creating = pool.submit(call, base, "POST", "/api/queues", {"name": "orders.new", "address": "orders"})
    wait_for(lambda: "orders.new" in queue_names(base), message="the queue made in the broker")
    assert not creating.done()
    held.start()
    status, info = creating.result(timeout=10)
    assert (status, info["name"], info["durable"]) == (201, "orders.new", True)
    with StoreView(held.url) as store:
        assert "orders.new" in store.queue_names()

    broker.kill()
    broker = start_broker(config=ADDRESS, store=held.url)
    send(broker.url, "orders", Message(body="after", durable=True))
    assert [m.body for m in receive_exactly(broker.url, "orders::orders.new", 1)] == ["after"]


def test_an_address_created_and_deleted_over_http_waits_for_the_store(held, pool, start_broker):
    broker = start_broker(store=held.url)
    base = http_url(broker)
    held.stop()
    creating = pool.submit(call, base, "POST", "/api/addresses", {"name": "audit", "routing_types": ["multicast"]})
    wait_for(lambda: "audit" in {a["name"] for a in call(base, "GET", "/api/addresses")[1]},
             message="the address made in the broker")
    assert not creating.done()
    held.start()
    assert creating.result(timeout=10)[0] == 201
    with StoreView(held.url) as store:
        assert "audit" in store.address_names()

    held.stop()
    deleting = pool.submit(call, base, "DELETE", "/api/addresses/audit")
    wait_for(lambda: "audit" not in {a["name"] for a in call(base, "GET", "/api/addresses")[1]},
             message="the address gone from the broker")
    assert not deleting.done()
    held.start()
    assert deleting.result(timeout=10) == (204, None)
    with StoreView(held.url) as store:
        assert "audit" not in store.address_names()


def test_a_store_that_gives_up_is_a_503_over_http_and_over_amqp(held, start_broker):
    broker = start_broker(config=ADDRESS, store=held.url, env={"HERMOD_STORE_GIVE_UP_S": "1"})
    base = http_url(broker)
    assert call(base, "POST", "/api/queues", {"name": "orders.a", "address": "orders"})[0] == 201
    assert call(base, "POST", "/api/queues", {"name": "orders.b", "address": "orders"})[0] == 201
    held.stop()
    status, answer = call(base, "DELETE", "/api/queues/orders.a")
    assert status == 503 and answer["error"].startswith("store failed: "), (status, answer)
    with pytest.raises(ManagementCallError) as refused:
        management_call(broker.url, "queue.delete", timeout=30, args={"name": "orders.b"})
    assert refused.value.status == 503 and "store failed" in str(refused.value)
    held.start()
    # The store is back: the broker serves, and a deletion is stored and answered again.
    status, answer = call(base, "POST", "/api/queues", {"name": "orders.c", "address": "orders"})
    assert status == 201, answer
    assert call(base, "DELETE", "/api/queues/orders.c") == (204, None)


def test_a_purge_is_answered_once_stored_and_the_purged_stay_purged_after_a_kill(held, pool, start_broker):
    broker = start_broker(config=ADDRESS, store=held.url)
    base = http_url(broker)
    assert call(base, "POST", "/api/queues", {"name": "orders.q", "address": "orders"})[0] == 201
    send(broker.url, "orders", *(Message(body=f"m{n}", durable=True, properties={"n": n}) for n in range(6)))
    held.stop()
    purging = pool.submit(call, base, "POST", "/api/queues/orders.q/purge", {"filter": "n < 4"})
    wait_for(lambda: call(base, "GET", "/api/queues/orders.q")[1]["messages"] == 2,
             message="the purge done in the broker")
    assert not purging.done()
    held.start()
    assert purging.result(timeout=10) == (200, {"removed": 4})

    broker.kill()
    broker = start_broker(config=ADDRESS, store=held.url)
    assert [m.body for m in receive_exactly(broker.url, "orders::orders.q", 2)] == ["m4", "m5"]
