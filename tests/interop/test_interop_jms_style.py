"""The JMS-style client (interop/rhea/jms.js: rhea speaking AMQP as the Qpid JMS client does).

No Java here: Maven Central (qpid-jms-client) is not reachable from this project's machines, so
the JMS client's wire behaviour is emulated; interop/README.md lists what is emulated.
"""
from __future__ import annotations


from interop_clients import bodies, eventually, queue_stats, require_selectors
from wire_helpers import connect


def test_jms_queue_producer_to_consumer_carries_the_jms_message_shape(broker, jms):
    jms.run("produce", url=broker.url, queue="orders", count=3, body="order {n}").ok()
    got = jms.run("consume", url=broker.url, queue="orders", count=3).ok()
    assert got.bodies == bodies("order {n}", range(3))
    for m in got.messages:
        assert m["annotations"] == {"x-opt-jms-msg-type": 5, "x-opt-jms-dest": 0}
        assert m["durable"] is True
        assert m["to"] == "orders"
        assert m["message_id"].startswith("ID:")
    ids = [m["message_id"] for m in got.messages]
    assert len(set(ids)) == 3


def test_jms_message_read_by_the_python_client(broker, jms):
    jms.run("produce", url=broker.url, queue="py.jms", count=1, body="hello", property=["region=EU", "qty=5"]).ok()
    conn = connect(broker.url)
    try:
        r = conn.create_receiver("py.jms")
        m = r.receive(timeout=10)
        r.accept()
    finally:
        conn.close()
    assert m.body == "hello"
    assert m.properties == {"region": "EU", "qty": 5}
    assert dict(m.annotations) == {"x-opt-jms-msg-type": 5, "x-opt-jms-dest": 0}


def test_jms_durable_subscription_is_named_clientid_dot_name_and_unsubscribe_deletes_it(broker, jms):
    sub = dict(url=broker.url, topic="prices", durable_subscription="ticker", client_id="cid")
    created = jms.run("consume", count=0, **sub).ok()
    assert created.events[0]["link"] == "ticker"
    q = queue_stats(broker.url)["cid.ticker"]
    assert (q["address"], q["routing_type"], q["durable"], q["consumers"]) == ("prices", "multicast", True, 0)

    jms.run("produce", url=broker.url, topic="prices", count=2).ok()
    eventually(lambda: queue_stats(broker.url)["cid.ticker"]["messages"] == 2, message="2 kept for cid.ticker")

    # session.unsubscribe("ticker"): attach with no source finds it by link name, close deletes it
    gone = jms.run("unsubscribe", url=broker.url, name="ticker", client_id="cid").ok()
    assert gone.events[0]["source"]["address"] == "cid.ticker"
    eventually(lambda: "cid.ticker" not in queue_stats(broker.url), message="cid.ticker deleted")
    again = jms.run("unsubscribe", url=broker.url, name="ticker", client_id="cid")
    assert again.rc == 2
    assert [e["condition"] for e in again.errors] == ["amqp:not-found"]


# qpid-jms puts distribution-mode `copy` on every durable subscription's source (durable and
# shared durable alike); the broker must still consume it (copy browses anycast queues only).
BOUND = 3  # seconds: these clients give up (and the test fails) quickly while the bug is there


def test_jms_durable_subscriber_gets_messages_published_while_it_listens(broker, jms):
    consumer = jms.start("consume", url=broker.url, topic="quotes.live", durable_subscription="live",
                         client_id="cid", count=3, timeout=BOUND)
    consumer.ready()
    jms.run("produce", url=broker.url, topic="quotes.live", count=3).ok()
    assert consumer.finish().ok().bodies == bodies("message {n}", range(3))


def test_jms_durable_subscriber_consumes_what_it_receives(broker, jms):
    sub = dict(url=broker.url, topic="quotes.kept", durable_subscription="kept", client_id="cid", timeout=BOUND)
    jms.run("consume", count=0, **sub).ok()
    jms.run("produce", url=broker.url, topic="quotes.kept", count=3, body="tick {n}").ok()
    got = jms.run("consume", count=3, **sub).ok()
    assert got.bodies == bodies("tick {n}", range(3))
    assert all(m["annotations"]["x-opt-jms-dest"] == 1 for m in got.messages)
    # acknowledged: nothing is left for the next session of this subscriber
    eventually(lambda: queue_stats(broker.url)["cid.kept"]["messages"] == 0, timeout=BOUND,
               message="cid.kept emptied by the subscriber's acks")


def test_jms_shared_durable_subscription_with_client_id_splits_messages(broker, jms):
    consumers = jms.start("consume", url=broker.url, topic="orders.events", shared_subscription="audit",
                          durable=True, client_id="cid", consumers=2, count=6, timeout=BOUND)
    ready = consumers.wait_event("ready", 2)
    assert [r["link"] for r in ready] == ["audit", "audit|2"]
    q = queue_stats(broker.url)["cid.audit"]
    assert (q["consumers"], q["durable"]) == (2, True)

    jms.run("produce", url=broker.url, topic="orders.events", count=6).ok()
    got = consumers.finish().ok()
    assert sorted(got.bodies) == bodies("message {n}", range(6))
    per = got.summary["per_consumer"]
    assert sum(per) == 6 and all(n > 0 for n in per), got.transcript()


def test_jms_shared_durable_subscription_without_client_id_is_global(broker, jms):
    consumers = jms.start("consume", url=broker.url, topic="alerts", shared_subscription="ops", durable=True,
                          consumers=2, count=4, timeout=BOUND)
    ready = consumers.wait_event("ready", 2)
    assert [r["link"] for r in ready] == ["ops|global", "ops|global2"]
    assert queue_stats(broker.url)["ops:global"]["consumers"] == 2
    jms.run("produce", url=broker.url, topic="alerts", count=4).ok()
    got = consumers.finish().ok()
    assert sorted(got.bodies) == bodies("message {n}", range(4))


def test_jms_shared_non_durable_subscription_goes_with_its_last_consumer(broker, jms):
    consumers = jms.start("consume", url=broker.url, topic="metrics", shared_subscription="dash",
                          client_id="app", consumers=2, count=4)
    ready = consumers.wait_event("ready", 2)
    assert [r["link"] for r in ready] == ["dash|volatile1", "dash|volatile2"]
    assert queue_stats(broker.url)["app.dash:shared-volatile"]["consumers"] == 2
    jms.run("produce", url=broker.url, topic="metrics", count=4).ok()
    assert sorted(consumers.finish().ok().bodies) == bodies("message {n}", range(4))
    eventually(lambda: "app.dash:shared-volatile" not in queue_stats(broker.url),
               message="app.dash:shared-volatile removed")


def test_jms_anonymous_producer_routes_by_x_opt_jms_dest(broker, jms, rhea_receive):
    # an anonymous JMS producer names the destination in `to` and its kind in x-opt-jms-dest
    sub = rhea_receive.start(url=broker.url, address="bulletins", capability="topic", count=2)
    sub.ready()
    jms.run("produce", url=broker.url, topic="bulletins", anonymous=True, count=2).ok()
    assert sub.finish().ok().bodies == bodies("message {n}", range(2))

    jms.run("produce", url=broker.url, queue="tasks", anonymous=True, count=2, body="task {n}").ok()
    assert queue_stats(broker.url)["tasks"]["routing_type"] == "anycast"
    assert jms.run("consume", url=broker.url, queue="tasks", count=2).ok().bodies == ["task 0", "task 1"]


def test_jms_consumer_with_selector(broker, jms):
    require_selectors()
    jms.run("produce", url=broker.url, queue="quotes", count=6, cycle="region=EU,US,APAC", property="px={n}").ok()
    got = jms.run("consume", url=broker.url, queue="quotes", count=2, selector="region = 'EU' OR px = 2").ok()
    assert got.bodies == bodies("message {n}", [0, 2])
    rest = jms.run("consume", url=broker.url, queue="quotes", count=4).ok()
    assert rest.bodies == bodies("message {n}", [1, 3, 4, 5])


def test_jms_consumer_with_invalid_selector_is_refused_before_it_opens(broker, jms):
    require_selectors()
    got = jms.run("consume", url=broker.url, queue="quotes", count=1, selector="region = ", timeout=BOUND)
    assert got.rc == 2, got.transcript()
    # qpid-jms throws InvalidSelectorException only when the reply's source is null; with any
    # source createConsumer() returns and the consumer is closed under the application later
    assert [e["event"] for e in got.events] == ["error"], got.transcript()
    assert got.errors[0]["condition"] == "amqp:invalid-field"
