"""Driving the console: open a view, wait on what the page shows, confirm a dialog."""
from __future__ import annotations

from hermod_testing import wait_for

REFRESH_MS = 250  # the console's refresh period in these tests (`?refresh=`), instead of 2 s


def open_view(browser, base: str, view: str) -> None:
    browser.get(f"{base}/?refresh={REFRESH_MS}#/{view}")
    wait_for(lambda: browser.run("return document.getElementById('view').dataset.view") == view.split("/")[0]
             .split("?")[0], message=f"view {view}")


def queue_counts(browser) -> dict[str, str]:
    """The queue table as the page shows it: name to the text of its messages cell."""
    return browser.run("""return Object.fromEntries(Array.from(document.querySelectorAll('tr[data-queue]'),
        tr => [tr.dataset.queue, tr.querySelector('td[data-field="messages"]').textContent]))""")


def wait_counts(browser, expected: dict[str, str], timeout: float = 10) -> None:
    wait_for(lambda: queue_counts(browser) == expected, timeout=timeout,
             message=f"queue table {expected} (shows {queue_counts(browser)})")


def confirm(browser, accept: bool = True) -> str:
    """Answer the open confirmation dialog; its question is answered."""
    wait_for(lambda: browser.run("return document.getElementById('confirm').open"), message="the confirmation")
    question = browser.find("#confirm-text").text
    browser.find(f'#confirm button[data-action="{"confirm" if accept else "cancel"}"]').click()
    wait_for(lambda: not browser.run("return document.getElementById('confirm').open"), message="dialog closed")
    return question


def status(browser) -> str:
    return browser.run("return document.getElementById('status').textContent")


def wait_status(browser, text: str) -> str:
    return wait_for(lambda: text in status(browser) and status(browser),
                    message=f"status '{text}' (shows '{status(browser)}')")


def depth_samples(browser, queue: str) -> int:
    """How many samples the queue's depth line holds (read in one script: the line is redrawn
    on every refresh, so an element reference would go stale)."""
    return browser.run("""const svg = Array.from(document.querySelectorAll('tr[data-queue]'))
        .find(tr => tr.dataset.queue === arguments[0])?.querySelector('svg.spark');
        return svg ? Number(svg.dataset.points) : 0""", queue)
