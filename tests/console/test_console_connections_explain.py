"""Connections with their links, closing one, and `explain` drawn as a route, in headless
Chromium against a real broker; and the screenshot of the console with real data."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from proton import Endpoint, Message
from proton.reactor import Container, Selector
from proton.utils import BlockingConnection, ConnectionClosed

from console_helpers import depth_samples, confirm, open_view, wait_counts, wait_status
from hermod_testing import ROOT, wait_for
from http_helpers import call, http_url, send


def connect(url: str, container_id: str) -> BlockingConnection:
    container = Container()
    container.container_id = container_id
    return BlockingConnection(url, timeout=10, container=container)


def links_shown(browser, container: str) -> list[dict]:
    return browser.run("""
        const card = Array.from(document.querySelectorAll('section.connection')).find(c => c.dataset.container === arguments[0]);
        if (!card) return [];
        return Array.from(card.querySelectorAll('tr[data-link]'), tr => Object.fromEntries(
            Array.from(tr.querySelectorAll('td[data-field]'), td => [td.dataset.field, td.textContent])));""", container)


def test_connections_show_links_with_credit_unsettled_and_filter_and_close(broker, browser):
    base = http_url(broker)
    send(broker.url, "tasks", *[Message(body=f"t{i}", properties={"colour": "red"}) for i in range(3)])
    conn = connect(broker.url, "console-victim")
    receiver = conn.create_receiver("tasks", credit=5, options=Selector("colour = 'red'"), name="red-tasks")
    got = receiver.receive(timeout=10)  # held unsettled
    assert got.body == "t0"
    open_view(browser, base, "connections")
    wait_for(lambda: any(l["name"] == "red-tasks" and l["unsettled"] != "0" for l in links_shown(browser, "console-victim")),
             message="the consumer link")
    (link,) = links_shown(browser, "console-victim")
    assert link["role"] == "receiver" and link["address"] == "tasks::tasks" and link["filter"] == "colour = 'red'"
    assert link["unsettled"] == "3" and int(link["credit"]) == 2  # 5 granted, 3 out
    close = 'section.connection[data-container="console-victim"] button[data-action="close"]'
    browser.find(close).click()  # found afresh each time: the list is redrawn on every refresh
    assert "console-victim" in confirm(browser, accept=False)
    assert links_shown(browser, "console-victim")  # cancelled: still open
    browser.find(close).click()
    confirm(browser)
    wait_status(browser, "closed connection")
    wait_for(lambda: links_shown(browser, "console-victim") == [], message="the connection gone from the page")
    with pytest.raises(ConnectionClosed) as closed:
        conn.wait(lambda: conn.conn.state & Endpoint.REMOTE_CLOSED, timeout=10)
    assert closed.value.connection.remote_condition.name == "amqp:connection:forced"
    # its deliveries went back: all three wait again
    assert call(base, "GET", "/api/queues/tasks")[1]["messages"] == 3


def explain_boxes(browser) -> list[tuple[str, str, str, bool]]:
    return browser.run("""return Array.from(document.querySelectorAll('#explain-route svg g.step'),
        g => [g.dataset.kind, g.dataset.name, g.dataset.passed, g.classList.contains('chosen')])""")


EXPLAIN_CONFIG = """
[[address]]
name = "events"
routing = ["multicast"]
  [[address.queue]]
  name = "all-events"
  routing = "multicast"
  [[address.queue]]
  name = "red-events"
  routing = "multicast"
  filter = "colour = 'red'"

[[address]]
name = "audit"
routing = ["anycast"]
  [[address.queue]]
  name = "audit"
  routing = "anycast"

[[divert]]
name = "copy-to-audit"
address = "events"
forwarding_address = "audit"
exclusive = false
"""


def test_explain_draws_the_route_with_the_divert_and_the_filtered_queue(start_broker, browser):
    broker = start_broker(config=EXPLAIN_CONFIG)
    base = http_url(broker)
    open_view(browser, base, "explain?address=events")
    assert browser.value("#explain-address") == "events"
    browser.find("#explain-properties").type("colour=blue")
    browser.find('#explain-form button[data-action="explain"]').click()
    wait_for(lambda: explain_boxes(browser), message="the route drawn")
    boxes = explain_boxes(browser)
    assert boxes[-1] == ["address", "events", "true", False]  # the root is placed last, after its subtree
    assert ["divert", "copy-to-audit", "true", False] in boxes
    assert ["address", "audit", "true", False] in boxes
    assert ["queue", "audit", "true", True] in boxes
    assert ["queue", "all-events", "true", True] in boxes
    assert ["queue", "red-events", "false", False] in boxes
    assert browser.run("return document.querySelectorAll('#explain-route svg path.arrow').length") == len(boxes) - 1
    assert browser.find('[data-field="route-queues"]').text == "goes to audit, all-events"


def test_screenshot_of_the_console_with_real_data(start_broker, browser, tmp_path):
    """The README's picture: `HERMOD_CONSOLE_SCREENSHOT=docs/console.png` writes it there."""
    broker = start_broker(config=EXPLAIN_CONFIG)
    base = http_url(broker)
    for i, name in enumerate(["orders", "payments", "shipping", "invoices"]):
        send(broker.url, name, *[Message(body=f"{name} {n}") for n in range(3 + 4 * i)])
    consumer = connect(broker.url, "shop-frontend")
    receiver = consumer.create_receiver("shipping", credit=2)
    open_view(browser, base, "queues")
    for wave in range(6):  # a few refreshes so that the depth lines have a shape
        send(broker.url, "orders", *[Message(body="more") for _ in range(2 * wave)])
        receiver.receive(timeout=10)
        receiver.accept()
        shown = call(base, "GET", "/api/queues")[1]
        wait_counts(browser, {q["name"]: str(q["messages"]) for q in shown})
        wait_for(lambda: depth_samples(browser, "orders") > 3 * wave,
                 message="samples")
    path = Path(os.environ.get("HERMOD_CONSOLE_SCREENSHOT") or tmp_path / "console.png")
    if not path.is_absolute():
        path = ROOT / path
    browser.screenshot(path)
    consumer.close()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
