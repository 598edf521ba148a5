"""Abandoned nodes waiting out their terminus expiry (AMQP 1.0 §3.5.3).

A temporary queue (a dynamic node) or a non-durable subscription whose last consumer detached
without closing its link is kept: its expiry policy says when the countdown starts (at the
detach, at the end of the link's session, at the close of its connection, or never) and its
timeout how long it then lasts. A consumer attaching to it in the meantime (a subscription by
the same container id and link name, a dynamic node by its address) stops the countdown.

One heap of deadlines for the whole broker and one timer armed at the earliest: starting a
countdown is O(log n); a cancelled one stays in the heap until its time and is skipped then
(its token no longer matches), so the heap holds at most one live entry per kept queue plus
the cancelled ones still due, each popped once.
"""
from __future__ import annotations

import heapq
import itertools
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ports import LingeringHost
    from .queue import Queue

log = logging.getLogger("hermod.core")


class Lingering:
    def __init__(self, host: LingeringHost):
        self.host = host  # the post office, seen through what the countdowns need of it
        self._heap: list[tuple[int, int, str]] = []  # (due ms, token, queue name)
        self._tokens: dict[str, int] = {}  # kept queue -> token of its live countdown (0: none yet)
        self._links: dict[tuple[str, str], str] = {}  # (container id, link name) -> kept subscription
        self._keys: dict[str, tuple[str, str]] = {}  # and back
        self._next = itertools.count(1)
        self._timer = None
        self._timer_due = 0

    def __contains__(self, queue_name: str) -> bool:
        return queue_name in self._tokens

    def __len__(self) -> int:
        return len(self._tokens)

    def keep(self, queue: Queue, link_key: tuple[str, str] | None = None) -> None:
        """`queue` has lost its last consumer but is kept (its countdown not started yet);
        `link_key` finds a subscription again on a re-attach."""
        self.cancel(queue)
        queue.lingering = True
        self._tokens[queue.name] = 0
        if link_key is not None:
            self._links[link_key] = queue.name
            self._keys[queue.name] = link_key

    def find(self, link_key: tuple[str, str]) -> str | None:
        """The kept subscription of this container id and link name, if any."""
        return self._links.get(link_key)

    def expire_in(self, queue: Queue, timeout_ms: int) -> None:
        """Start the countdown of a kept queue: it goes after `timeout_ms` unless a consumer
        attaches first (0: now)."""
        if self._tokens.get(queue.name) != 0:
            return  # not kept any more (resumed, deleted) or already counting down
        if timeout_ms <= 0:
            self._expire(queue)
            return
        token = next(self._next)
        self._tokens[queue.name] = token
        due = self.host.clock.now_ms() + timeout_ms
        heapq.heappush(self._heap, (due, token, queue.name))
        self._arm(due)

    def cancel(self, queue: Queue) -> None:
        """A consumer attached (or the queue was deleted): no countdown any more."""
        queue.lingering = False
        self._forget(queue.name)

    def _forget(self, name: str) -> None:
        if self._tokens.pop(name, None) is None:
            return
        key = self._keys.pop(name, None)
        if key is not None and self._links.get(key) == name:
            del self._links[key]

    def _arm(self, due: int) -> None:
        if self._timer is not None and self._timer_due <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = self.host.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self.host.clock.now_ms()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, token, name = heapq.heappop(heap)
            if self._tokens.get(name) != token:
                continue  # resumed, or counting down again from a later start
            queue = self.host.queues.get(name)
            if queue is None:
                self._forget(name)
                continue
            self._expire(queue)
        if heap:
            self._arm(heap[0][0])

    def _expire(self, queue: Queue) -> None:
        self.cancel(queue)
        if queue.deleted or queue.consumers:
            return
        # A client's temporary reply queue going is routine (every CLI call has one): debug only.
        log.log(logging.DEBUG if queue.temporary else logging.INFO,
                "queue %s expired: its terminus expiry timeout ran out", queue.name)
        self.host.delete_queue(queue.name)
