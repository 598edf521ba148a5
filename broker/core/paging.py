"""Paging: under the `page` address-full policy a queue keeps a window of its messages in
memory and the rest in the store (durable queues on a durable store) or the spool (every other
queue), and reads them back in order as consumers drain the window (see flow.py for when).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from . import ports
from .consumer import Ref
from .queue_state import QueueState

if TYPE_CHECKING:
    from .queue import Queue

log = logging.getLogger("hermod.core")

PAGE_WINDOW = 1000  # messages of a paging queue kept in memory (waiting or out with consumers)
PAGE_RETRY_MS = (100, 30_000)  # a failed page read is tried again after this (doubling) delay
PAGE_MEMORY_SHARE = 0.8  # no paging in while the broker's messages use this share of its limit


class Paging(QueueState):
    __slots__ = ()

    def page_out(self, ref: Ref) -> None:
        """Page policy: the ref is in the store (or the spool) only; read back when the window
        drains. Raises OSError when the spool cannot keep it (nothing changed then)."""
        if not self.stores:
            host = self.host
            if host.spool is None:
                raise OSError(f"queue {self.name}: no spool to page to")
            host.spool.append(self.name, ports.StoredReference(host.message_record(ref.message),
                                                             ref.delivery_count))
        self.added += 1
        if self.paged >= 0:
            self.paged += 1

    def _page_in(self) -> None:
        """Read the next window of paged messages when the one in memory runs low. What is in
        memory counts messages out with consumers too, so a consumer with endless credit that
        never settles cannot page a whole queue in; nor does paging in go past the broker's
        memory limit (it waits for memory to be released)."""
        if self._reading or not self.paged or self.deleted or self.held >= PAGE_WINDOW // 2:
            return
        host = self.host
        flow = host.flow
        room = flow.room(PAGE_MEMORY_SHARE)
        if room <= 0:
            flow.wait(self, self._page_in)  # called again once messages leave memory
            return
        limit = PAGE_WINDOW - self.held
        if self.held:  # by the size of what is in memory, as many as fit in the room left
            limit = max(1, min(limit, int(room // (self.size / self.held + flow.ref_overhead))))
        self._reading = True
        if self.stores:
            host.journal.read_page(self.name, self._cursor, limit,
                                 lambda stored: self._paged_in(stored, limit))
            return
        try:
            stored = [] if host.spool is None else host.spool.read(self.name, limit)
        except OSError as error:
            self._paged_in(error)
            return
        self._paged_in(stored, limit)

    def _page_in_later(self, error: BaseException) -> None:
        """A page read failed: the messages are still where they were paged to; try again."""
        delay = self._page_retry_ms = min(max(self._page_retry_ms * 2, PAGE_RETRY_MS[0]),
                                          PAGE_RETRY_MS[1])
        log.error("queue %s: paging in failed (%s); trying again in %.1f s", self.name, error,
                  delay / 1000)
        host = self.host
        host.call_at(host.clock.now_ms() + delay, self._page_in)

    def _paged_in(self, stored: list | BaseException, limit: int | None = None) -> None:
        self._reading = False
        if self.deleted:
            return
        if isinstance(stored, BaseException):
            self._page_in_later(stored)
            return
        self._page_retry_ms = 0
        if not stored:
            self.paged = 0  # nothing more in the store
            return
        make = self.host.message_from_record
        assert make is not None, "PostOffice.recover() sets message_from_record before any paging"
        doubt = self.in_doubt
        for s in stored:
            ref = Ref(make(s.message), cast("Queue", self), s.delivery_count)  # a mixin of Queue
            ref.durable = self.stores
            self.paged -= 1 if self.paged > 0 else 0
            self.recover(ref)
            if doubt and s.message.id in doubt and (self.backlog.remove(ref) or self.scheduled.remove(ref)):
                doubt.pop(s.message.id)(ref)  # a prepared transaction's: not for consumers
        if self.paged == 0 and (limit is None or len(stored) >= limit):
            self.paged = -1  # more than we counted (after a restart): keep reading
        self._page_in()
