"""The HTTP management API against a real broker: state made by real AMQP clients, read and
changed over HTTP with the standard library."""
from __future__ import annotations

from proton import Endpoint, Message
from proton.utils import BlockingConnection, ConnectionClosed

from hermod_testing import wait_for
from http_helpers import call, http_url, q, receive_all, send


def test_health_and_lists_show_what_amqp_clients_made(broker):
    base = http_url(broker)
    assert call(base, "GET", "/health") == (200, {"status": "ok"})
    send(broker.url, "orders", Message(body="a"), Message(body="b"))
    status, queues = call(base, "GET", "/api/queues")
    assert status == 200
    orders = next(x for x in queues if x["name"] == "orders")
    assert orders["address"] == "orders" and orders["routing_type"] == "anycast"
    assert orders["messages"] == 2 and orders["consumers"] == 0 and orders["added"] == 2
    assert set(orders) >= {"name", "address", "routing_type", "durable", "messages", "consumers",
                           "added", "acked", "filter", "purpose"}
    status, addresses = call(base, "GET", "/api/addresses")
    assert {"name": "orders", "routing_types": ["anycast"], "queues": ["orders"],
            "auto_created": True} in addresses
    assert call(base, "GET", "/api/queues/orders")[1]["messages"] == 2
    assert call(base, "GET", "/api/queues/" + q("orders::orders"))[1]["name"] == "orders"


def test_peek_is_non_destructive_and_readable(broker):
    base = http_url(broker)
    send(broker.url, "peek",
         Message(body="hello", properties={"colour": "red", "n": 3}, priority=7, durable=True, id="m-1"),
         Message(body=b"\x00\xffbinary"),
         Message(body=b"utf8 bytes"),
         Message(body={"k": [1, 2]}, annotations={"x-opt-custom": "v"}))
    status, messages = call(base, "GET", "/api/queues/peek/messages?limit=10")
    assert status == 200 and len(messages) == 4
    # queue order: the priority 7 message first, then arrival order
    first = messages[0]
    assert first["body"] == "hello" and first["body_encoding"] == "text"
    assert first["properties"] == {"colour": "red", "n": 3}
    assert first["message_id"] == "m-1" and first["durable"] is True and first["priority"] == 7
    assert first["delivery_count"] == 0
    assert messages[1]["body_encoding"] == "base64" and messages[1]["body"] == "AP9iaW5hcnk="
    assert messages[2]["body"] == "utf8 bytes"
    assert messages[3]["body"] == {"k": [1, 2]} and messages[3]["annotations"]["x-opt-custom"] == "v"
    assert len(call(base, "GET", "/api/queues/peek/messages?limit=2")[1]) == 2
    assert [m["body"] for m in call(base, "GET", "/api/queues/peek/messages?filter=" + q("colour = 'red'"))[1]] == ["hello"]
    # nothing was taken
    bodies = [m.body for m in receive_all(broker.url, "peek", 4)]
    assert bodies[0] == "hello" and len(bodies) == 4


def test_purge_with_a_filter_removes_only_matching_messages(broker):
    base = http_url(broker)
    send(broker.url, "jobs", *[Message(body=f"j{i}", properties={"odd": i % 2 == 1}) for i in range(6)])
    assert call(base, "POST", "/api/queues/jobs/purge", {"filter": "odd = TRUE"}) == (200, {"removed": 3})
    assert call(base, "GET", "/api/queues/jobs")[1]["messages"] == 3
    assert [m.body for m in receive_all(broker.url, "jobs", 3)] == ["j0", "j2", "j4"]
    send(broker.url, "jobs", Message(body="x"))
    assert call(base, "POST", "/api/queues/jobs/purge") == (200, {"removed": 1})


def test_move_routes_to_the_target_and_removes_here(broker):
    base = http_url(broker)
    send(broker.url, "target", Message(body="already"))
    send(broker.url, "source", *[Message(body=f"m{i}", properties={"i": i}) for i in range(4)])
    assert call(base, "POST", "/api/queues/source/move", {"to": "target", "filter": "i >= 2"}) == (200, {"moved": 2})
    assert call(base, "GET", "/api/queues/source")[1]["messages"] == 2
    got = receive_all(broker.url, "target", 3)
    assert [m.body for m in got] == ["already", "m2", "m3"]
    assert got[1].annotations["x-opt-ORIG-ADDRESS"] == "source"
    assert [m.body for m in receive_all(broker.url, "source", 2)] == ["m0", "m1"]


def test_move_to_an_address_that_does_not_exist_is_404_and_keeps_the_messages(broker):
    base = http_url(broker)
    send(broker.url, "keep", Message(body="stay"))
    status, answer = call(base, "POST", "/api/queues/keep/move", {"to": "nowhere"})
    assert status == 404 and "nowhere" in answer["error"]
    assert call(base, "GET", "/api/queues/keep")[1]["messages"] == 1
    assert call(base, "GET", "/api/addresses/nowhere")[0] == 404


def test_retry_sends_dead_letters_back_to_their_queue(broker):
    base = http_url(broker)
    send(broker.url, "work", Message(body="w1"), Message(body="w2"))
    conn = BlockingConnection(broker.url, timeout=10)
    receiver = conn.create_receiver("work", credit=2)
    for _ in range(2):
        receiver.receive(timeout=10)
        receiver.reject()
    conn.close()
    wait_for(lambda: call(base, "GET", "/api/queues/DLQ")[0] == 200 and
             call(base, "GET", "/api/queues/DLQ")[1]["messages"] == 2, message="two dead letters")
    assert call(base, "POST", "/api/queues/DLQ/retry") == (200, {"moved": 2})
    assert call(base, "GET", "/api/queues/DLQ")[1]["messages"] == 0
    assert [m.body for m in receive_all(broker.url, "work", 2)] == ["w1", "w2"]


def test_addresses_and_queues_are_created_and_deleted(broker):
    base = http_url(broker)
    assert call(base, "POST", "/api/addresses", {"name": "news", "routing_types": ["multicast"]})[0] == 201
    assert call(base, "POST", "/api/addresses", {"name": "news"})[0] == 409
    status, created = call(base, "POST", "/api/queues", {"name": "news-eu", "address": "news",
                                                        "routing_type": "multicast", "filter": "region = 'eu'"})
    assert status == 201 and created["filter"] == "region = 'eu'" and created["address"] == "news"
    assert call(base, "POST", "/api/queues", {"name": "news-eu", "address": "news"})[0] == 409
    status, answer = call(base, "POST", "/api/queues", {"name": "bad", "filter": "region ="})
    assert status == 400 and "filter" in answer["error"].lower()
    status, answer = call(base, "DELETE", "/api/addresses/news")
    assert status == 409 and "news-eu" in answer["error"]
    send(broker.url, "topic://news", Message(body="eu", properties={"region": "eu"}),
         Message(body="us", properties={"region": "us"}))
    assert call(base, "GET", "/api/queues/news-eu")[1]["messages"] == 1
    assert call(base, "DELETE", "/api/queues/news-eu") == (204, None)
    assert call(base, "GET", "/api/queues/news-eu")[0] == 404
    assert call(base, "DELETE", "/api/addresses/news") == (204, None)
    assert all(a["name"] != "news" for a in call(base, "GET", "/api/addresses")[1])


def test_errors_are_json_with_the_right_status(broker):
    base = http_url(broker)
    status, answer = call(base, "GET", "/api/queues/no-such-queue")
    assert status == 404 and "no-such-queue" in answer["error"]
    status, answer = call(base, "POST", "/api/queues", raw=b"{not json")
    assert status == 400 and "JSON" in answer["error"]
    assert call(base, "POST", "/api/queues", raw=b"[1, 2]")[0] == 400
    assert call(base, "GET", "/api/nothing-here")[0] == 404
    assert call(base, "DELETE", "/api/connections/999999")[0] == 404
    assert call(base, "GET", "/api/queues/x/messages?limit=abc")[0] == 400
    assert call(base, "PUT", "/api/queues")[0] == 405


def test_send_a_message_over_http(broker):
    base = http_url(broker)
    send(broker.url, "inbox", Message(body="first"))
    status, answer = call(base, "POST", "/api/addresses/inbox/messages",
                          {"body": "from http", "properties": {"kind": "test"}, "durable": True})
    assert status == 200 and answer == {"routed_to": ["inbox"]}
    got = receive_all(broker.url, "inbox", 2)
    assert got[1].body == "from http" and got[1].properties == {"kind": "test"} and got[1].durable
    assert call(base, "POST", "/api/addresses/missing/messages", {"body": "x"})[0] == 404


def test_connections_are_listed_and_closed_with_connection_forced(broker):
    base = http_url(broker)
    conn = BlockingConnection(broker.url, timeout=10, container_id="listed-client")
    conn.create_receiver("watched", credit=5)
    status, conns = call(base, "GET", "/api/connections")
    mine = next(c for c in conns if c["container_id"] == "listed-client")
    assert mine["remote"].startswith("127.0.0.1:")
    link = mine["links"][0]
    assert link["role"] == "receiver" and link["address"] == "watched::watched" and link["credit"] == 5
    assert call(base, "DELETE", f"/api/connections/{mine['id']}") == (204, None)
    condition = None
    try:
        conn.wait(lambda: conn.conn.state & Endpoint.REMOTE_CLOSED, timeout=10)
        condition = conn.conn.remote_condition
    except ConnectionClosed as e:
        condition = e.connection.remote_condition
    assert condition is not None and condition.name == "amqp:connection:forced"
    wait_for(lambda: all(c["container_id"] != "listed-client" for c in call(base, "GET", "/api/connections")[1]),
             message="the closed connection to leave the list")
