"""`hermod queue|address|connection|explain`: the management operations from the command line,
over AMQP (`hermod.management`). Each prints one line per row (or JSON with --json) and fails
with one line."""
from __future__ import annotations

import argparse
import json


def call(args, operation: str, **arguments):
    from .tools.clients import management_call
    from .tools.target import Target
    return management_call(Target.from_args(args), operation, args={k: v for k, v in arguments.items() if v is not None})


def _out(args, value, text) -> int:
    if args.json:
        print(json.dumps(value, indent=None))
    else:
        for line in text(value):
            print(line)
    return 0


def properties(pairs: list[str] | None) -> dict:
    from .cli_errors import CliError
    out: dict = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--property {pair!r}: expected K=V")
        try:
            out[key] = json.loads(value)  # numbers and true/false as such; text otherwise
        except ValueError:
            out[key] = value
        if isinstance(out[key], (dict, list)):
            out[key] = value
    return out


def cmd_queue(args) -> int:
    op = args.queue_command
    if op == "create":
        return _out(args, call(args, "queue.create", name=args.name, address=args.address,
                                routing_type=args.routing_type, durable=not args.non_durable, filter=args.filter),
                    lambda q: [f"created queue {q['name']} on {q['address']} ({q['routing_type']})"])
    if op == "delete":
        call(args, "queue.delete", name=args.name)
        return _out(args, {"deleted": args.name}, lambda v: [f"deleted queue {args.name}"])
    if op == "purge":
        return _out(args, _with_progress(args, "purge", "removed", lambda: call(
                        args, "queue.purge", name=args.name, filter=args.filter)),
                    lambda v: [f"removed {v['removed']} messages from {args.name}"])
    if op == "browse":
        return _out(args, call(args, "queue.browse", name=args.name, limit=args.limit, filter=args.filter),
                    lambda rows: [f"{m['id']} {json.dumps(m['properties'])} {m['body'] if m['body_encoding'] == 'text' else m['body_encoding'] + ':' + json.dumps(m['body'])}"
                                  for m in rows])
    if op == "move":
        return _out(args, _with_progress(args, "move", "moved", lambda: call(
                        args, "queue.move", name=args.name, to=args.to, filter=args.filter)),
                    lambda v: [f"moved {v['moved']} messages from {args.name} to {args.to}"])
    if op == "retry":
        return _out(args, _with_progress(args, "retry", "moved", lambda: call(args, "queue.retry", name=args.name)),
                    lambda v: [f"moved {v['moved']} messages from {args.name} back to their addresses"])
    raise AssertionError(op)


def _with_progress(args, verb: str, counted: str, work):
    """Run a queue operation; with a progress line (a terminal, or --progress) the queue's depth
    is read on a second connection while it runs: done = depth at the start - depth now."""
    from .tools.progress import Progress, while_running
    progress = Progress(f"{verb} {args.name}", True if args.progress else None)
    if not progress.enabled:
        return work()

    def depth() -> int:
        return call(args, "queue.get", name=args.name)["messages"]
    total = depth()
    result = while_running(work, lambda: max(0, total - depth()), progress, total)
    progress.update(result[counted], total, final=True)
    return result


def cmd_address(args) -> int:
    op = args.address_command
    if op == "create":
        return _out(args, call(args, "address.create", name=args.name, routing_types=args.routing),
                    lambda a: [f"created address {a['name']} ({','.join(a['routing_types'])})"])
    if op == "delete":
        call(args, "address.delete", name=args.name)
        return _out(args, {"deleted": args.name}, lambda v: [f"deleted address {args.name}"])
    return _out(args, call(args, "address.list"),
                lambda rows: [f"{a['name']} {','.join(a['routing_types'])} {','.join(a['queues']) or '-'}"
                              for a in rows])


def cmd_connection(args) -> int:
    if args.connection_command == "close":
        call(args, "connection.close", id=args.id)
        return _out(args, {"closed": args.id}, lambda v: [f"closed connection {args.id}"])
    return _out(args, call(args, "connection.list"),
                lambda rows: [f"{c['id']} {c['remote']} {c['container_id']} {c['user'] or '-'} links={len(c['links'])}"
                              for c in rows])


def cmd_explain(args) -> int:
    route = call(args, "explain", address=args.address, routing_type=args.routing_type,
                  properties=properties(args.property))

    def text(r):
        lines = [f"{s['kind']} {s['name']}: {'passed' if s['passed'] else 'not passed'}"
                 + (f" ({s['detail']})" if s.get("detail") else "") + (f" filter {s['filter']}" if s.get("filter") else "")
                 for s in r["steps"]]
        return lines + [f"queues: {' '.join(r['queues']) or '(none)'}"]
    return _out(args, route, text)


def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The connection options (tools/target.py) and --json, which every management command takes."""
    from .tools.target import add_arguments
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    return p


def add_parsers(sub, queue) -> None:
    """The management subcommands; `queue` is the existing `hermod queue` subparsers."""

    c = common(queue.add_parser("create", help="create a queue"))
    c.add_argument("name")
    c.add_argument("--address")
    c.add_argument("--routing-type", choices=("anycast", "multicast"), default="anycast")
    c.add_argument("--filter")
    c.add_argument("--non-durable", action="store_true")
    for name, help_text in (("delete", "delete a queue and its messages"), ("retry", "dead letters back")):
        common(queue.add_parser(name, help=help_text)).add_argument("name")
    p = common(queue.add_parser("purge", help="remove the (matching) messages"))
    p.add_argument("name")
    p.add_argument("--filter")
    b = common(queue.add_parser("browse", help="peek at messages without taking them"))
    b.add_argument("name")
    b.add_argument("--limit", type=int, default=100)
    b.add_argument("--filter")
    m = common(queue.add_parser("move", help="move (matching) messages to an address"))
    m.add_argument("name")
    m.add_argument("--to", required=True)
    m.add_argument("--filter")
    for name in ("purge", "move", "retry"):
        queue.choices[name].add_argument("--progress", action="store_true",
                                         help="a progress line on stderr even when it is not a terminal")
    for name in ("create", "delete", "purge", "browse", "move", "retry"):
        queue.choices[name].set_defaults(func=cmd_queue)

    address = sub.add_parser("address", help="addresses").add_subparsers(dest="address_command", required=True)
    a = common(address.add_parser("create"))
    a.add_argument("name")
    a.add_argument("--routing", action="append", choices=("anycast", "multicast"))
    common(address.add_parser("delete")).add_argument("name")
    common(address.add_parser("list"))
    for p in address.choices.values():
        p.set_defaults(func=cmd_address)

    conn = sub.add_parser("connection", help="connections").add_subparsers(dest="connection_command", required=True)
    common(conn.add_parser("list"))
    common(conn.add_parser("close")).add_argument("id")
    for p in conn.choices.values():
        p.set_defaults(func=cmd_connection)

    e = common(sub.add_parser("explain", help="how a message sent to ADDRESS would route"))
    e.add_argument("address")
    e.add_argument("--routing-type", choices=("anycast", "multicast"))
    e.add_argument("--property", action="append", metavar="K=V")
    e.set_defaults(func=cmd_explain)

    from . import cli_definitions, cli_inspect
    cli_inspect.add_parsers(sub, queue, common)
    cli_definitions.add_parsers(sub, common)
