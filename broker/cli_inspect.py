"""`hermod status`, `queue show`, `divert list`, `subscription list`: the read-only views an operator
of Artemis or RabbitMQ reaches for, over `hermod.management` with the same login and checks as
every management command (each shows only what the user may browse). Text is aligned columns
on a terminal (one space between cells when piped; a cell that may hold spaces, a selector,
comes last); `--json` prints the answer as it came."""
from __future__ import annotations

import json

from .cli_manage import call
from .tools.table import aligned

EXIT_DEGRADED = 1


def _print(rows: list[list]) -> None:
    for line in aligned(rows):
        print(line)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:.1f}MiB"


def _duration(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return "".join(f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m")) if v) + f"{s}s"


def _or_dash(value) -> str:
    return "-" if value is None or value == "" else str(value).lower() if isinstance(value, bool) else str(value)


def cmd_status(args) -> int:
    """Exit 0 while the broker serves normally, 1 while degraded (the store unreachable)."""
    s = call(args, "status")
    if args.json:
        print(json.dumps(s))
    else:
        store = s["store"]
        rows = [["node", s["node"]], ["version", s["version"]], ["uptime", _duration(s["uptime_s"])],
                ["status", s["status"] + (f" ({s['reason']})" if s.get("reason") else "")],
                ["store", f"{store['kind']} {'up' if store['up'] else 'down'}"],
                ["addresses", s["addresses"]], ["queues", s["queues"]], ["messages", s["messages"]],
                ["consumers", s["consumers"]], ["connections", _or_dash(s["connections"])]]
        memory = s.get("memory")
        if memory:
            rows.append(["memory", f"{_mib(memory['used_bytes'])} of {_mib(memory['limit_bytes'])} for messages, "
                                   f"{_mib(memory['resident_bytes'])} resident"])
        for l in s.get("listeners") or ():
            served = l.get("served")
            rows.append(["listener", f"{l['name']} {l['scheme']}://{l['host']}:{l['port']} "
                                     f"{','.join(l['protocols'])}"
                                     + (f" (served: {','.join(served)})" if served is not None else "")])
        for line in aligned(rows, pad=True):
            print(line)
    return EXIT_DEGRADED if s["status"] != "ok" else 0


QUEUE_FIELDS = ("name", "address", "routing_type", "durable", "purpose", "temporary", "auto_created", "filter",
                "max_consumers", "exclusive", "last_value_key", "owner", "messages", "ready", "delivering",
                "scheduled", "paged", "bytes_in_memory", "consumers", "added", "acked", "delivered", "expired",
                "lingering")


def cmd_queue_show(args) -> int:
    q = call(args, "queue.show", name=args.name)
    if args.json:
        print(json.dumps(q))
        return 0
    for line in aligned([[key, _or_dash(q.get(key))] for key in QUEUE_FIELDS], pad=True):
        print(line)
    consumers = q.get("consumer_details") or []
    if consumers:
        print()
        _print([["consumer", "connection", "remote", "user", "container_id", "link", "credit", "in_flight",
                 "browser", "priority", "selector"]] +
               [[c["id"], _or_dash(c["connection"]), _or_dash(c["remote"]), _or_dash(c["user"]),
                 _or_dash(c["container_id"]), _or_dash(c["link"]), c["credit"], c["in_flight"],
                 _or_dash(c["browser"]), c["priority"], _or_dash(c["selector"])] for c in consumers])
    return 0


def _listing(args, operation: str, header: list[str], row) -> int:
    """A list operation's answer: JSON with --json, else the header and a row per entry."""
    rows = call(args, operation)
    if args.json:
        print(json.dumps(rows))
    else:
        _print([header] + [row(r) for r in rows])
    return 0


def cmd_divert_list(args) -> int:
    return _listing(args, "divert.list",
                    ["name", "kind", "address", "forwarding_address", "exclusive", "routing_type", "fired", "filter"],
                    lambda d: [d["name"], d["kind"], d["address"], ",".join(d["forwarding_address"]),
                               _or_dash(d["exclusive"]), d["routing_type"], d["fired"], _or_dash(d["filter"])])


def cmd_subscription_list(args) -> int:
    return _listing(args, "subscription.list",
                    ["address", "queue", "client_id", "owner", "durable", "shared", "consumers", "messages",
                     "selector"],
                    lambda s: [s["address"], s["queue"], _or_dash(s["client_id"]), _or_dash(s["owner"]),
                               _or_dash(s["durable"]), _or_dash(s["shared"]), s["consumers"], s["messages"],
                               _or_dash(s["selector"])])


def add_parsers(sub, queue, common) -> None:
    """`status`, `queue show`, `divert list`, `subscription list`; `common` adds the connection
    options and --json."""
    common(sub.add_parser("status", help="node, version, uptime, store, listeners, counts, memory "
                                         "(exit 1 while degraded)")).set_defaults(func=cmd_status)
    show = common(queue.add_parser("show", help="every attribute of one queue, its depth and consumers"))
    show.add_argument("name")
    show.set_defaults(func=cmd_queue_show)
    divert = sub.add_parser("divert", help="diverts").add_subparsers(dest="divert_command", required=True)
    common(divert.add_parser("list", help="diverts and composites, with their filters")).set_defaults(
        func=cmd_divert_list)
    subscription = sub.add_parser("subscription", help="topic subscriptions").add_subparsers(
        dest="subscription_command", required=True)
    common(subscription.add_parser("list", help="durable and shared subscriptions")).set_defaults(
        func=cmd_subscription_list)
