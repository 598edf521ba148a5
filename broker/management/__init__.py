"""Management: statistics and operations over the core's public API (no Proton, no SQL)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..app import Broker

QUEUE_STAT_FIELDS = ("address", "queue", "routing_type", "durable", "messages", "consumers",
                     "added", "acked")


class Management:
    def __init__(self, broker: Broker):
        self.broker = broker

    def queue_stats(self, requester: str | None = None) -> list[dict]:
        """A row per queue, leaving out `requester` (the temporary queue the reply goes to)."""
        rows = []
        for q in sorted(self.broker.postoffice.queues.values(), key=lambda q: (q.address.name, q.name)):
            if q.name == requester:
                continue
            rows.append({"address": q.address.name, "queue": q.name, "routing_type": q.routing_type,
                         "durable": q.durable, "messages": q.message_count,
                         "consumers": len(q.consumers), "added": q.added, "acked": q.acked,
                         "paged": max(q.paged, 0), "bytes_in_memory": q.size})
        return rows

    def address_stats(self, requester: str | None = None) -> list[dict]:
        return [{"address": a.name, "routing_types": sorted(a.routing_types),
                 "queues": sorted(a.queues)} for a in sorted(self.broker.postoffice.addresses.values(),
                                                             key=lambda a: a.name) if a.name != requester]

    def store_stats(self, requester: str | None = None) -> dict:
        """Group commit figures of the store's journal (empty for the in-memory store)."""
        stats = getattr(self.broker.journal, "stats", None)
        if stats is None:
            return {}
        s = stats()
        return {"commits": s.commits, "units": s.units, "ops": s.ops,
                "avg_units_per_commit": round(s.avg_units_per_commit, 1),
                "max_units_per_commit": s.max_units_per_commit,
                "avg_ops_per_commit": round(s.avg_ops_per_commit, 1), "summary": s.summary()}

    def operations(self) -> dict:
        return {"queue.stat": self.queue_stats, "address.stat": self.address_stats,
                "store.stat": self.store_stats}

    def call(self, operation: str, requester: str | None = None):
        op = self.operations().get(operation)
        if op is None:
            raise KeyError(f"unknown management operation {operation!r}")
        return op(requester)
