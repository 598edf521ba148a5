"""The client commands that talk to a running broker as a client would: `producer`, `consumer`,
`queue stat` and `perf` (each through tools/target.py: --url, --user, --password-file, --ca, ...)."""
from __future__ import annotations


def target(args):
    """The broker a client command talks to, and as whom (tools/target.py)."""
    from .tools.target import Target
    return Target.from_args(args)


def cmd_producer(args) -> int:
    from .tools.clients import produce
    from .cli_manage import properties
    sent = produce(target(args), args.address, count=args.count, size=args.size, durable=args.durable,
                   topic=args.topic, body=args.body, properties=properties(args.property))
    print(f"sent {sent} message{'' if sent == 1 else 's'} to {args.address}")
    return 0


def cmd_consumer(args) -> int:
    from .tools.clients import consume
    got = consume(target(args), args.address, count=args.count, selector=args.selector, topic=args.topic,
                  durable=args.durable, client_id=args.client_id, quiet=args.quiet,
                  timeout=args.timeout)
    print(f"received {got} messages from {args.address}")
    return 0


def cmd_queue_stat(args) -> int:
    from .tools.clients import management_call
    broker = target(args)
    rows = management_call(broker, "queue.stat")
    if getattr(args, "json", False):
        import json
        print(json.dumps(rows))
        return 0
    # A trailing flag, on the rows it applies to only: a subscription nobody consumes.
    from .tools.table import aligned
    table = [["address", "queue", "routing_type", "durable", "messages", "consumers", "added", "acked", "[flags]"]]
    table += [[r["address"], r["queue"], r["routing_type"], str(r["durable"]).lower(), r["messages"], r["consumers"],
               r["added"], r["acked"], "no-consumer" if r.get("no_consumer") else ""] for r in rows]
    for line in aligned(table):
        print(line)
    from .bridge import bridge_rows
    for line in bridge_rows(management_call(broker, "bridge.stat")):
        print(line)
    return 0


def cmd_perf(args) -> int:
    from .tools.perf import main as perf_main
    return perf_main(args)


def add_parsers(sub):
    """`producer`, `consumer`, `queue stat`; the `queue` subparsers, for the management commands."""
    from .tools.target import add_arguments as add_connection_arguments
    prod = sub.add_parser("producer", help="send messages")
    add_connection_arguments(prod)
    prod.add_argument("--address", required=True)
    prod.add_argument("--count", type=int, default=1000)
    prod.add_argument("--size", type=int, default=100)
    prod.add_argument("--durable", action="store_true")
    prod.add_argument("--body", help="the body, as text (instead of --size bytes)")
    prod.add_argument("--property", action="append", metavar="K=V",
                      help="an application property (numbers and true/false typed as such); repeatable")
    kind = prod.add_mutually_exclusive_group()
    kind.add_argument("--topic", action="store_true")
    kind.add_argument("--queue", action="store_true")
    prod.set_defaults(func=cmd_producer)

    cons = sub.add_parser("consumer", help="receive exactly N messages")
    add_connection_arguments(cons)
    cons.add_argument("--address", required=True)
    cons.add_argument("--count", type=int, default=1000)
    cons.add_argument("--selector")
    cons.add_argument("--durable", metavar="NAME", help="durable subscription name")
    cons.add_argument("--client-id")
    cons.add_argument("--quiet", action="store_true", help="print only the final count")
    cons.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
    kind = cons.add_mutually_exclusive_group()
    kind.add_argument("--topic", action="store_true")
    kind.add_argument("--queue", action="store_true")
    cons.set_defaults(func=cmd_consumer)

    queue = sub.add_parser("queue", help="queues").add_subparsers(dest="queue_command", required=True)
    stat = queue.add_parser("stat", help="a row per queue")
    add_connection_arguments(stat)
    stat.add_argument("--json", action="store_true", help="print the rows as JSON")
    stat.set_defaults(func=cmd_queue_stat)
    return queue


def add_perf_parser(sub) -> None:
    perf = sub.add_parser("perf", help="load generator")
    from .tools.perf import add_arguments
    add_arguments(perf)
    perf.set_defaults(func=cmd_perf)
