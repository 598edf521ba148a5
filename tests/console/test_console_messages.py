"""A queue's messages and the actions on them, clicked through in headless Chromium against a
real broker: browse (every section readable, hostile input shown as text), purge, move and
retry after a confirmation, and sending a test message that an AMQP client then receives."""
from __future__ import annotations

from proton import Message, symbol
from proton.utils import BlockingConnection

from console_helpers import confirm, open_view, wait_status
from hermod_testing import wait_for
from http_helpers import call, http_url, q, receive_all, send

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def messages_shown(browser) -> list[dict]:
    """Each message card as the page shows it: its sections' key/value rows and its body."""
    return browser.run("""
        const table = (a, f) => Object.fromEntries(Array.from(a.querySelectorAll(`table[data-field="${f}"] tr`),
            tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent]));
        return Array.from(document.querySelectorAll('#messages article.message'), a => ({
            header: table(a, 'header'), annotations: table(a, 'annotations'),
            amqp_properties: table(a, 'amqp-properties'), properties: table(a, 'properties'),
            encoding: a.querySelector('[data-field="body"]').dataset.encoding,
            body: a.querySelector('[data-field="body"] pre, [data-field="body"] p').textContent,
            hex: !!a.querySelector('[data-field="body"] pre.hex')}));""")


def test_browse_shows_every_section_readably_and_takes_nothing(broker, browser):
    base = http_url(broker)
    send(broker.url, "peek",
         Message(body="hello", id="m-1", subject="greeting", correlation_id="c-9", durable=True, priority=7,
                 properties={"colour": "red", "n": 3}, annotations={symbol("x-opt-custom"): "v"}),
         Message(body=b"\x00\x01\xffbinary\x7f"),
         Message(body={"k": [1, 2], "nested": {"a": True}}))
    open_view(browser, base, "queue/peek")
    wait_for(lambda: len(messages_shown(browser)) == 3, message="three messages")
    first, binary, mapped = messages_shown(browser)
    assert first["header"] == {"durable": "true", "priority": "7", "delivery count": "0", "delivering": "false"}
    assert first["annotations"] == {"x-opt-custom": "v"}
    assert first["amqp_properties"]["message_id"] == "m-1" and first["amqp_properties"]["subject"] == "greeting"
    assert first["amqp_properties"]["correlation_id"] == "c-9"
    assert first["properties"] == {"colour": "red", "n": "3"}
    assert (first["encoding"], first["body"]) == ("text", "hello")
    assert binary["encoding"] == "base64" and binary["hex"]
    assert binary["body"].startswith("00000000  00 01 ff 62 69 6e 61 72 79 7f") and binary["body"].endswith("...binary.")
    assert mapped["encoding"] == "amqp-value" and not mapped["hex"]
    assert '"nested": {\n    "a": true' in mapped["body"] and '"k": [\n    1,\n    2\n  ]' in mapped["body"]
    # a selector narrows the browse
    browser.find("#browse-filter").type("colour = 'red'")
    browser.find('button[data-action="browse"]').click()
    wait_for(lambda: [m["body"] for m in messages_shown(browser)] == ["hello"], message="the filtered browse")
    assert call(base, "GET", "/api/queues/peek")[1]["messages"] == 3  # nothing was taken
    assert browser.console_errors() == []


def test_hostile_queue_names_and_bodies_are_shown_as_text(broker, browser):
    base = http_url(broker)
    send(broker.url, HOSTILE, Message(body=HOSTILE, properties={HOSTILE: HOSTILE}, subject=HOSTILE))
    open_view(browser, base, "queues")
    wait_for(lambda: browser.run("return document.querySelectorAll('tr[data-queue]').length") == 1, message="the row")
    row = browser.find("tr[data-queue] a")
    assert row.text == HOSTILE
    row.click()
    wait_for(lambda: len(messages_shown(browser)) == 1, message="the hostile message")
    (shown,) = messages_shown(browser)
    assert shown["body"] == HOSTILE and shown["properties"] == {HOSTILE: HOSTILE}
    assert shown["amqp_properties"]["subject"] == HOSTILE
    assert browser.find('[data-field="queue-name"]').text == HOSTILE
    assert browser.run("return window.__pwned") is None
    assert browser.run("return document.querySelectorAll('#view img, #view script').length") == 0


def test_purge_asks_first_and_then_empties_the_queue(broker, browser):
    base = http_url(broker)
    send(broker.url, "jobs", *[Message(body=f"j{i}") for i in range(3)])
    open_view(browser, base, "queue/jobs")
    wait_for(lambda: len(messages_shown(browser)) == 3, message="three jobs")
    browser.find('button[data-action="purge"]').click()
    assert confirm(browser, accept=False) == "Purge every waiting message of queue jobs?"
    assert call(base, "GET", "/api/queues/jobs")[1]["messages"] == 3  # cancelled: nothing happened
    browser.find('button[data-action="purge"]').click()
    confirm(browser)
    wait_status(browser, "purged 3 messages from jobs")
    wait_for(lambda: browser.run("return !!document.querySelector('[data-field=\"no-messages\"]')"),
             message="no messages shown")
    assert call(base, "GET", "/api/queues/jobs")[1]["messages"] == 0
    send(broker.url, "jobs", Message(body="after"))
    assert [m.body for m in receive_all(broker.url, "jobs", 1)] == ["after"]  # the purged ones are gone


def make_dead_letters(broker, address: str, bodies: list[str]) -> None:
    """Messages on `address` (application property `n` = their index) rejected into the DLQ."""
    send(broker.url, address, *[Message(body=b, properties={"n": i}) for i, b in enumerate(bodies)])
    conn = BlockingConnection(broker.url, timeout=10)
    try:
        receiver = conn.create_receiver(address, credit=len(bodies))
        for _ in bodies:
            receiver.receive(timeout=10)
            receiver.reject()
    finally:
        conn.close()


def test_move_the_selected_dead_letters_then_retry_the_rest(broker, browser):
    base = http_url(broker)
    make_dead_letters(broker, "work", ["w0", "w1", "w2"])
    send(broker.url, "parking", Message(body="already"))
    wait_for(lambda: call(base, "GET", "/api/queues/DLQ")[0] == 200 and
             call(base, "GET", "/api/queues/DLQ")[1]["messages"] == 3, message="three dead letters")
    open_view(browser, base, "queue/DLQ")
    wait_for(lambda: [m["body"] for m in messages_shown(browser)] == ["w0", "w1", "w2"], message="the dead letters")
    assert messages_shown(browser)[0]["annotations"]["x-opt-ORIG-ADDRESS"] == "work"
    # the browse's selector is also what move takes
    browser.find("#browse-filter").type("n >= 1")
    browser.find('button[data-action="browse"]').click()
    wait_for(lambda: [m["body"] for m in messages_shown(browser)] == ["w1", "w2"], message="the selected ones")
    browser.find("#move-to").type("parking")
    browser.find('button[data-action="move"]').click()
    assert confirm(browser) == "Move the waiting messages of DLQ that match the selector to address parking?"
    wait_status(browser, "moved 2 messages to parking")
    assert call(base, "GET", "/api/queues/DLQ")[1]["messages"] == 1
    moved = receive_all(broker.url, "parking", 3)
    assert [m.body for m in moved] == ["already", "w1", "w2"]
    assert moved[1].annotations["x-opt-ORIG-ADDRESS"] == "DLQ"

    browser.find("#browse-filter").clear()
    browser.find('button[data-action="browse"]').click()
    wait_for(lambda: [m["body"] for m in messages_shown(browser)] == ["w0"], message="w0 left")
    browser.find('button[data-action="retry"]').click()
    assert confirm(browser) == "Send the dead letters on DLQ back to the addresses they came from?"
    wait_status(browser, "retried 1 messages")
    wait_for(lambda: browser.run("return !!document.querySelector('[data-field=\"no-messages\"]')"),
             message="the DLQ shown empty")
    assert call(base, "GET", "/api/queues/DLQ")[1]["messages"] == 0
    assert [m.body for m in receive_all(broker.url, "work", 1)] == ["w0"]


def test_delete_asks_first_and_removes_the_queue(broker, browser):
    base = http_url(broker)
    send(broker.url, "old", Message(body="x"))
    open_view(browser, base, "queue/old")
    wait_for(lambda: len(messages_shown(browser)) == 1, message="the message")
    browser.find('button[data-action="delete"]').click()
    assert confirm(browser) == "Delete queue old and all its messages?"
    wait_for(lambda: browser.run("return document.getElementById('view').dataset.view") == "queues",
             message="back on the queue list")
    assert call(base, "GET", "/api/queues/" + q("old"))[0] == 404


def test_send_a_test_message_that_an_amqp_client_receives(broker, browser):
    base = http_url(broker)
    send(broker.url, "inbox", Message(body="first"))
    open_view(browser, base, "queue/inbox")
    wait_for(lambda: len(messages_shown(browser)) == 1, message="the first message")
    browser.find('a[data-action="send"]').click()
    wait_for(lambda: browser.value("#send-address") == "inbox", message="the address filled in")
    browser.find("#send-properties").type("colour=blue\npriority_hint=5\nurgent=true")
    browser.find("#send-body").type("hello from the console <b>bold?</b>")
    browser.find('#send-form button[data-action="send"]').click()
    wait_for(lambda: browser.find("#send-result").text == "routed to inbox", message="the routing answer")
    first, second = receive_all(broker.url, "inbox", 2)
    assert first.body == "first"
    assert second.body == "hello from the console <b>bold?</b>"
    assert second.properties == {"colour": "blue", "priority_hint": 5, "urgent": True}
