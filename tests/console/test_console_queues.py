"""The console's queue table in headless Chromium against a real broker: depths as AMQP
clients made them, refreshed in place, filtered and paged by the server; 10,000 queues."""
from __future__ import annotations

import time

from proton import Message

from console_helpers import depth_samples, open_view, queue_counts, wait_counts
from hermod_testing import wait_for
from http_helpers import call, http_url, send


def test_queue_table_shows_depths_and_refreshes_without_reloading(broker, browser):
    base = http_url(broker)
    send(broker.url, "orders", *[Message(body=f"o{i}") for i in range(3)])
    send(broker.url, "billing", Message(body="b"))
    open_view(browser, base, "queues")
    wait_counts(browser, {"billing": "1", "orders": "3"})
    browser.run("window.__same_page = true")
    send(broker.url, "orders", Message(body="o3"), Message(body="o4"))
    wait_counts(browser, {"billing": "1", "orders": "5"})
    assert browser.run("return window.__same_page") is True  # refreshed in place, not reloaded
    # depth over time: the orders row's line has gathered several samples
    wait_for(lambda: depth_samples(browser, "orders") >= 3,
             message="samples in the depth line")
    assert browser.find("#queues thead").text.split()[:2] == ["queue", "address"]
    assert browser.console_errors() == []


def test_filter_narrows_the_table_and_sort_puts_the_deepest_first(broker, browser):
    base = http_url(broker)
    for name, n in (("eu.orders", 1), ("eu.billing", 4), ("us.orders", 2)):
        send(broker.url, name, *[Message(body="x") for _ in range(n)])
    open_view(browser, base, "queues")
    wait_counts(browser, {"eu.orders": "1", "eu.billing": "4", "us.orders": "2"})
    browser.find("#queue-filter").type("ORDERS")  # any case, queue or address name
    wait_counts(browser, {"eu.orders": "1", "us.orders": "2"})
    assert browser.find('[data-field="pager"]').text == "1–2 of 2"
    browser.find("#queue-filter").clear()
    browser.find("#queue-filter").type("eu.")
    wait_counts(browser, {"eu.orders": "1", "eu.billing": "4"})
    browser.find('#queue-sort option[value="messages"]').click()
    wait_for(lambda: list(queue_counts(browser)) == ["eu.billing", "eu.orders"], message="deepest first")


def test_ten_thousand_queues_load_page_by_page_and_filter_fast(start_broker, browser):
    n = 10_000
    config = "".join(f'[[address]]\nname = "load.q{i:05d}"\nrouting = ["anycast"]\n'
                     f'  [[address.queue]]\n  name = "load.q{i:05d}"\n  routing = "anycast"\n  durable = false\n'
                     for i in range(n))
    broker = start_broker(config=config)
    base = http_url(broker)
    send(broker.url, "load.q09999", Message(body="last"), Message(body="last"))
    status, page = call(base, "GET", "/api/queues?search=load.q0999&limit=5")
    assert status == 200 and [q["name"] for q in page] == [f"load.q0999{i}" for i in range(5)]

    started = time.monotonic()
    open_view(browser, base, "queues")
    wait_for(lambda: browser.find('[data-field="pager"]').text == f"1–50 of {n}", message="the first page")
    loaded = time.monotonic() - started
    assert len(queue_counts(browser)) == 50

    started = time.monotonic()
    browser.find("#queue-filter").type("q09999")
    wait_counts(browser, {"load.q09999": "2"})
    filtered = time.monotonic() - started
    print(f"\n10,000 queues: first page shown in {loaded * 1000:.0f} ms, filter applied in {filtered * 1000:.0f} ms")
    assert loaded < 5 and filtered < 3, (loaded, filtered)
    browser.find("#queue-filter").clear()
    browser.find("#queue-filter").type("load")
    wait_for(lambda: browser.find('[data-field="pager"]').text == f"1–50 of {n}", message="all again")
    browser.find('button[data-action="next"]').click()
    wait_for(lambda: browser.find('[data-field="pager"]').text == f"51–100 of {n}", message="the second page")
    assert list(queue_counts(browser))[0] == "load.q00050"
