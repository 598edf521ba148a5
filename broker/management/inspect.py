"""The read-only views an operator reaches for (`hermod status`, `queue show`, `divert list`,
`subscription list`): each narrowed to what the caller may browse, like every list.

`status` speaks for the whole broker only to a broker-wide reader (`browse` from an entry with
`match = "#"`): a tenant gets the node's name, version, uptime and store health (what `/health`
tells anyone) and the counts of her own queues; listeners, connections and memory are null.
"""
from __future__ import annotations

import socket
import time
import zlib
from typing import Callable
from urllib.parse import urlsplit

from .. import __version__
from ..core.kinds import QueuePurpose
from .render import queue_info

View = Callable[[str], bool] | None
_STARTED = time.time()


def node_name(config) -> str:
    """The broker's name for metrics and status, the same across restarts: `[ha] node` when set,
    else `hermod@HOST` and a short checksum of the store's location (two brokers on one host keep
    apart; the password of a store URL plays no part)."""
    if config.ha.node:
        return config.ha.node
    parts = urlsplit(config.store.url)
    where = parts._replace(netloc=parts.hostname or "").geturl() if parts.password else config.store.url
    return f"hermod@{socket.gethostname()}-{zlib.crc32(where.encode()):08x}"


def _visible(view: View, address: str) -> bool:
    return view is None or view(address)


def store_kind(url: str) -> str:
    """`memory`, `sqlite`, `postgresql`, ... (the URL's scheme without its driver)."""
    return "memory" if url == "memory" else url.partition(":")[0].partition("+")[0]


def status(broker, connections, view: View, broker_wide: bool) -> dict:
    """Node, version, uptime, store and its health, listeners with their protocols, counts and
    memory; the broker-wide parts only for a broker-wide reader (else null)."""
    po = broker.postoffice
    problem = broker.journal.problem()
    queues = [q for q in po.queues.values() if not q.temporary and _visible(view, q.address.name)]
    answer = {
        "node": node_name(broker.config), "version": __version__,
        "uptime_s": round(time.time() - _STARTED, 1),
        "status": "degraded" if problem else "ok", "reason": problem,
        "store": {"kind": store_kind(broker.config.store.url), "up": problem is None, "problem": problem},
        "addresses": sum(1 for a in po.addresses.values() if not a.temporary and _visible(view, a.name)),
        "queues": len(queues), "messages": sum(q.message_count for q in queues),
        "consumers": sum(len(q.consumers) for q in queues),
        "listeners": None, "connections": None, "memory": None,
    }
    if broker_wide:
        figures = connections.figures()
        answer["connections"] = figures.get("connections", 0)
        answer["listeners"] = listeners(broker, connections)
        answer["memory"] = {"used_bytes": po.flow.memory_used + po.flow.reserved,
                            "limit_bytes": po.flow.memory_limit, "resident_bytes": _resident_bytes()}
    return answer


def listeners(broker, connections) -> list[dict]:
    """Each listener with the port it is bound to (the adapter's port, when it tells) and the
    protocols its front door detects."""
    bound = getattr(connections, "listeners", None)
    rows = bound() if bound is not None else []
    if rows:
        return rows
    cfg = broker.config
    return [{"name": l.name, "host": l.host, "port": l.port, "scheme": l.scheme,
             "protocols": list(l.protocols)} for l in (cfg.main_listener(), *cfg.extra_listeners())]


def _resident_bytes() -> int:
    from .metrics import _resident_bytes as resident
    return resident()


def queue_show(queue, connections) -> dict:
    """Every attribute of one queue, its depth in each state, and its consumers, each with the
    connection it came on when the protocol adapter can say (`connections` None: not shown)."""
    info = queue_info(queue)
    info.update({
        "temporary": queue.temporary, "max_consumers": queue.max_consumers, "exclusive": queue.exclusive,
        "last_value_key": queue.last_value_key or None, "owner": queue.extra.get("owner"),
        "ready": max(queue.message_count - queue.delivering, 0), "scheduled": len(queue.scheduled),
        "paged": max(queue.paged, 0), "bytes_in_memory": queue.size, "delivered": queue.delivered,
        "expired": queue.expired, "lingering": queue.lingering,
    })
    peers_of = getattr(connections, "consumer_peers", None) if connections is not None else None
    peers = peers_of() if peers_of is not None else {}
    info["consumer_details"] = [
        {"id": c.id, "selector": c.selector_text, "browser": c.browser, "priority": c.priority,
         "credit": c.credit, "in_flight": len(c.in_flight), "exclusive": c.exclusive,
         **(peers.get(c.id) or {"connection": None, "remote": None, "user": None, "container_id": None,
                                "protocol": None, "link": None})}
        for c in queue.consumers]
    return info


def divert_list(broker, view: View) -> list[dict]:
    """The configured diverts and composites, as configured (filter text included), with how
    often each fired; shown when the caller may browse its source and every target."""
    fired = {d.name: d.fired for d in broker.diverts}
    rows = []
    for d in broker.config.diverts:
        targets = [a.strip() for a in d["forwarding_address"].split(",") if a.strip()]
        rows.append({"name": d["name"], "kind": "divert", "address": d["address"], "forwarding_address": targets,
                     "filter": d.get("filter"), "exclusive": bool(d.get("exclusive", False)),
                     "routing_type": d.get("routing_type", "strip"), "transformer": d.get("transformer"),
                     "fired": fired.get(d["name"], 0)})
    for c in broker.config.composites:
        targets = [fw.get("queue") or fw.get("topic") for fw in c["forward"]]
        rows.append({"name": c["name"], "kind": "composite", "address": c["name"], "forwarding_address": targets,
                     "filter": None, "exclusive": True, "routing_type": c["kind"], "transformer": None,
                     "fired": fired.get(c["name"], 0)})
    return sorted((r for r in rows if _visible(view, r["address"])
                   and all(_visible(view, t) for t in r["forwarding_address"])), key=lambda r: r["name"])


def subscription_list(broker, view: View) -> list[dict]:
    """Topic subscriptions that outlive their link (durable or shared): the queue, its address,
    who owns it, the client id (Artemis names a subscription queue `CLIENTID.NAME`), selector,
    consumers and depth."""
    rows = []
    for q in broker.postoffice.queues.values():
        if q.purpose != QueuePurpose.SUBSCRIPTION or q.temporary or not _visible(view, q.address.name):
            continue
        client_id, dot, name = q.name.partition(".")
        rows.append({"queue": q.name, "address": q.address.name, "durable": q.durable,
                     "owner": q.extra.get("owner"), "client_id": client_id if dot else None,
                     "subscription": name if dot else q.name, "selector": q.filter_text,
                     "shared": q.max_consumers != 1, "consumers": len(q.consumers), "messages": q.message_count})
    return sorted(rows, key=lambda r: (r["address"], r["queue"]))


__all__ = ["status", "queue_show", "divert_list", "subscription_list", "node_name", "store_kind"]
