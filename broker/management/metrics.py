"""`/metrics`: the broker's figures in the Prometheus text format (version 0.0.4).

Names follow RabbitMQ's `rabbitmq_prometheus` (per-object labels `vhost="/"` and `queue`; the
RabbitMQ-Overview Grafana dashboard joins every panel on `rabbitmq_identity_info`) and Artemis's
Micrometer gauges (`artemis_*` with `broker`, `address`, `queue`), where Hermod has the concept,
plus `hermod_*` for the rest. Pure: the figures come from the core's public state and the
connection port; the caller serves the text.

Global counters never go down (Prometheus's rate() would read a drop as a restart): they are
the sums over the queues that exist now plus what deleted queues had counted
(`PostOffice.retired`); "delivered" counts deliveries to consumers, redeliveries included, so a
consumer leaving with unacknowledged messages takes nothing back. One scrape is one pass over the
queues, built as a list of lines: 10,000 queues cost tens of milliseconds (benchmarks/).
"""
from __future__ import annotations

import os
import resource
import time

from .. import __version__

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_STARTED = time.time()


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


class Snapshot:
    """One scrape's view, taken on the event loop: the list of queue objects (a copy of the
    references, so queues created or deleted later do not disturb it) and the broker-wide
    figures. Reading each queue's counters and formatting 10,000 queues' lines (about 120,000)
    is the expensive part and runs off the loop (`text`); the counters are plain ints that the
    loop updates one at a time, so a queue's row may be a message apart between two fields
    (ready is clamped at 0), as with any scrape taken during traffic."""

    __slots__ = ("node", "queues", "retired", "connection_figures", "memory_limit", "memory_used", "memory_unfinished",
                 "latency", "journal_depth", "store", "store_problem", "bridges", "resident", "open_fds")

    def __init__(self, broker, connection_figures: dict):
        from .inspect import node_name
        po = broker.postoffice
        self.node = node_name(broker.config)  # the same across restarts (dashboards key on it)
        self.queues = list(po.queues.values())
        self.retired = dict(po.retired)
        self.connection_figures = connection_figures
        self.memory_limit = po.flow.memory_limit
        # What counts against max_memory_mb: messages on queues and unfinished transfers.
        self.memory_used = po.flow.memory_used + po.flow.reserved
        self.memory_unfinished = po.flow.reserved
        self.latency = po.delivery_latency.snapshot()
        self.journal_depth = po.journal_depth
        stats = getattr(broker.journal, "stats", None)
        self.store = stats() if stats is not None else None
        self.store_problem = broker.journal.problem()
        self.bridges = [b.status() for b in getattr(broker, "bridges", ())]
        self.resident = _resident_bytes()
        self.open_fds = _open_fds()


def render(broker, connection_figures: dict) -> str:
    """Snapshot and text in one call (tests, benchmarks); the HTTP handler splits the two."""
    return text(Snapshot(broker, connection_figures))


def text(snap: Snapshot) -> str:
    """The Prometheus text of a snapshot. Pure: safe to run on another thread."""
    node = snap.node
    connection_figures = snap.connection_figures
    out: list[str] = []
    add = out.append

    def family(name: str, kind: str, help_text: str) -> None:
        add(f"# HELP {name} {help_text}")
        add(f"# TYPE {name} {kind}")

    rows = []
    retired = snap.retired
    total_added, total_acked, total_delivered = retired["added"], retired["acked"], retired["delivered"]
    total_consumers = total_messages = 0
    figures = [(q.name, q.address.name, q.message_count, q.delivering, len(q.consumers), q.added, q.acked,
                q.expired, len(q.scheduled), q.durable, q.delivered) for q in snap.queues]
    for (qname, address, count, delivering, consumers, added, acked, expired, scheduled,
         durable, delivered_here) in sorted(figures):
        name = _label(qname)
        rows.append((f'{{vhost="/",queue="{name}"}} ', f'{{broker="hermod",address="{_label(address)}",'
                     f'queue="{name}"}} ', count, delivering, consumers, added, acked, expired, scheduled,
                     durable))
        total_added += added
        total_acked += acked
        total_delivered += delivered_here
        total_consumers += consumers
        total_messages += count

    family("rabbitmq_identity_info", "gauge", "RabbitMQ node and cluster identity (Hermod: the broker)")
    add(f'rabbitmq_identity_info{{rabbitmq_node="{_label(node)}",rabbitmq_cluster="hermod",'
        f'rabbitmq_endpoint="amqp"}} 1')
    family("rabbitmq_build_info", "untyped", "Hermod version")
    add(f'rabbitmq_build_info{{rabbitmq_version="{__version__}",product="hermod",'
        f'product_version="{__version__}"}} 1')
    conns = connection_figures.get("connections", 0)
    limit = snap.memory_limit
    delivered = total_delivered
    proto = '{protocol="amqp10"}'
    for name, kind, help_text, value in (
            ("rabbitmq_connections", "gauge", "Connections currently open", conns),
            ("rabbitmq_channels", "gauge", "AMQP 1.0 sessions currently open", connection_figures.get("sessions", 0)),
            ("rabbitmq_queues", "gauge", "Queues available", len(snap.queues)),
            ("rabbitmq_global_consumers", "gauge", "Consumers currently connected", total_consumers),
            ("rabbitmq_global_publishers", "gauge", "Publishers (sending links) currently connected",
             connection_figures.get("publishers", 0)),
            ("rabbitmq_global_messages_received_total" + proto, "counter",
             "Messages routed to queues", total_added),
            ("rabbitmq_global_messages_routed_total" + proto, "counter", "Messages routed to queues", total_added),
            ("rabbitmq_global_messages_delivered_total" + proto, "counter",
             "Messages delivered to consumers (redeliveries included)", delivered),
            ("rabbitmq_global_messages_delivered_consume_manual_ack_total" + proto, "counter",
             "Messages delivered to consumers", delivered),
            ("rabbitmq_global_messages_acknowledged_total" + proto, "counter",
             "Messages acknowledged by consumers", total_acked),
            ("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used in bytes", snap.resident),
            ("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory limit for messages (max_memory_mb)", limit),
            ("rabbitmq_process_open_fds", "gauge", "Open file descriptors", snap.open_fds),
            ("rabbitmq_process_max_fds", "gauge", "Open file descriptors limit",
             resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
            ("rabbitmq_erlang_uptime_seconds", "gauge", "Seconds the broker has been running",
             round(time.time() - _STARTED, 3))):
        if value is not None:
            family(name.partition("{")[0], kind, help_text)
            add(f"{name} {value}")

    _per_queue(family, add, rows, out)
    _per_address(family, out, snap.queues)

    family("artemis_connection_count", "gauge", "Connections currently open")
    add(f'artemis_connection_count{{broker="hermod"}} {conns}')
    family("artemis_active", "gauge", "1 while the broker serves")
    add('artemis_active{broker="hermod"} 1')
    # Artemis's broker-wide memory gauges: bytes of messages held in memory by every address,
    # and that as a percentage of the global limit (Hermod's max_memory_mb).
    family("artemis_address_memory_usage", "gauge", "Memory used by all the addresses for in-memory messages")
    add(f'artemis_address_memory_usage{{broker="hermod"}} {snap.memory_used}')
    family("artemis_address_memory_usage_percentage", "gauge",
           "Memory used by all the addresses as a percentage of max_memory_mb")
    add(f'artemis_address_memory_usage_percentage{{broker="hermod"}} '
        f'{int(100 * snap.memory_used / limit) if limit else 0}')
    family("hermod_connections", "gauge", "Connections currently open, per listener")
    per_listener = connection_figures.get("per_listener") or {"main": conns}
    out.extend(f'hermod_connections{{listener="{_label(name)}"}} {n}' for name, n in per_listener.items())
    family("hermod_messages", "gauge", "Messages on all queues")
    add(f"hermod_messages {total_messages}")
    family("hermod_memory_used_bytes", "gauge",
           "Bytes held in memory for clients (messages, and transfers not yet complete), against max_memory_mb")
    add(f"hermod_memory_used_bytes {snap.memory_used}")
    family("hermod_memory_unfinished_bytes", "gauge", "Bytes of transfers clients have not finished sending")
    add(f"hermod_memory_unfinished_bytes {snap.memory_unfinished}")
    family("hermod_memory_limit_bytes", "gauge",
           "Memory limit for messages (max_memory_mb; default a quarter of RAM)")
    add(f"hermod_memory_limit_bytes {limit}")
    _latency(family, add, snap.latency)
    family("hermod_journal_depth", "gauge", "Sends handed to the store and not yet committed")
    add(f"hermod_journal_depth {snap.journal_depth}")
    family("hermod_store_up", "gauge", "1 while the store answers, 0 while it is unreachable (durable sends wait, "
           "then are refused)")
    add(f"hermod_store_up {0 if snap.store_problem else 1}")
    _store(family, add, snap.store)
    _bridges(family, add, snap.bridges)
    add("")
    return "\n".join(out)


def _per_address(family, out: list, queues: list) -> None:
    """Per address that holds queues (temporary ones aside), read from the scrape's queues, so
    the loop copies nothing more: Artemis's `artemis_address_size` (bytes of the address's
    messages in memory; an address without queues holds none), and the messages on its queues
    and added to them. One pass over the queues, one over their addresses."""
    totals: dict[str, list] = {}
    for q in queues:
        address = q.address
        t = totals.get(address.name)
        if t is None:
            if address.temporary:
                continue
            totals[address.name] = [address.size, q.message_count, q.added]
        else:
            t[1] += q.message_count
            t[2] += q.added
    sizes, counts, added = [], [], []
    for name in sorted(totals):
        size, count, adds = totals[name]
        labels = f'{{broker="hermod",address="{_label(name)}"}} '
        sizes.append(f"artemis_address_size{labels}{size}")
        counts.append(f"hermod_address_messages{labels}{count}")
        added.append(f"hermod_address_messages_added{labels}{adds}")
    family("artemis_address_size", "gauge", "Bytes of the address's messages held in memory")
    out.extend(sizes)
    family("hermod_address_messages", "gauge", "Messages on the address's queues")
    out.extend(counts)
    family("hermod_address_messages_added", "gauge", "Messages added to the address's queues that exist now")
    out.extend(added)


def _latency(family, add, histogram) -> None:
    name = "hermod_delivery_latency_seconds"
    family(name, "histogram", "Time from a message's arrival to its acknowledgement by a consumer")
    for bound, n in histogram.cumulative():
        le = "+Inf" if bound == float("inf") else repr(bound)
        add(f'{name}_bucket{{le="{le}"}} {n}')
    add(f"{name}_sum {histogram.sum_ms / 1000:.3f}")
    add(f"{name}_count {histogram.count}")


def _per_queue(family, add, rows, out: list) -> None:
    q_help = (
        ("rabbitmq_queue_messages_ready", "gauge", "Messages ready to be delivered", lambda r: max(r[2] - r[3], 0)),
        ("rabbitmq_queue_messages_unacked", "gauge", "Messages delivered and not yet acknowledged", lambda r: r[3]),
        ("rabbitmq_queue_messages", "gauge", "Messages ready and unacknowledged", lambda r: r[2]),
        ("rabbitmq_queue_consumers", "gauge", "Consumers on the queue", lambda r: r[4]),
    )
    for name, kind, help_text, value in q_help:
        family(name, kind, help_text)
        out.extend([f"{name}{r[0]}{value(r)}" for r in rows])
    a_help = (
        ("artemis_message_count", "Messages on the queue", lambda r: r[2]),
        ("artemis_durable_message_count", "Messages on a durable queue", lambda r: r[2] if r[9] else 0),
        ("artemis_delivering_message_count", "Messages out with consumers", lambda r: r[3]),
        ("artemis_scheduled_message_count", "Messages scheduled for later", lambda r: r[8]),
        ("artemis_consumer_count", "Consumers on the queue", lambda r: r[4]),
        ("artemis_messages_added", "Messages added to the queue", lambda r: r[5]),
        ("artemis_messages_acknowledged", "Messages acknowledged", lambda r: r[6]),
        ("artemis_messages_expired", "Messages expired", lambda r: r[7]),
    )
    for name, help_text, value in a_help:
        family(name, "gauge", help_text)
        out.extend([f"{name}{r[1]}{value(r)}" for r in rows])


# The store's group-commit figures: (metric, type, help, how to read it off JournalStats).
_STORE_METRICS = (
    ("hermod_store_commits_total", "counter", "Store transactions committed (group commits)",
     lambda s: s.commits),
    ("hermod_store_units_total", "counter", "Journal units committed (a unit holds one send, one producer link's sends of a reactor turn, or a batch of acknowledgements)", lambda s: s.units),
    ("hermod_store_operations_total", "counter", "Store operations committed", lambda s: s.ops),
    ("hermod_store_commit_batch_units_max", "gauge", "Largest commit batch, in units",
     lambda s: s.max_units_per_commit),
    ("hermod_store_commit_seconds_total", "counter", "Time spent committing",
     lambda s: f"{s.commit_seconds_total:.6f}"),
    ("hermod_store_commit_seconds_max", "gauge", "Longest commit", lambda s: f"{s.commit_seconds_max:.6f}"),
    ("hermod_store_failed_units_total", "counter", "Units the store could not apply",
     lambda s: s.failed_units),
)


def _store(family, add, s) -> None:
    if s is None:
        return
    for name, kind, text, value in _STORE_METRICS:
        family(name, kind, text)
        add(f"{name} {value(s)}")


# Each [[bridge]]'s figures: (metric, type, help, how to read it off Bridge.status()).
_BRIDGE_METRICS = (
    ("hermod_bridge_up", "gauge", "1 while the bridge's link to the remote broker is up",
     lambda s: int(s["up"])),
    ("hermod_bridge_forwarded_total", "counter", "Messages the remote broker accepted",
     lambda s: s["forwarded"]),
    ("hermod_bridge_backlog", "gauge", "Messages on the bridge's local queue (unconfirmed ones too)",
     lambda s: s["backlog"]),
    ("hermod_bridge_unconfirmed", "gauge", "Messages sent and not yet settled by the remote",
     lambda s: s["unconfirmed"]),
)


def _bridges(family, add, rows: list) -> None:
    if not rows:
        return
    for name, kind, text, value in _BRIDGE_METRICS:
        family(name, kind, text)
        for s in rows:
            add(f'{name}{{bridge="{_label(s["name"])}"}} {value(s)}')
    family("hermod_bridge_state", "gauge", "1 for the state the bridge is in")
    for s in rows:
        add(f'hermod_bridge_state{{bridge="{_label(s["name"])}",state="{s["state"]}"}} 1')

