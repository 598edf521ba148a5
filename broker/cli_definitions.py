"""`hermod definitions export [FILE]` and `hermod definitions import FILE`: the broker's addresses,
queues (with their attributes), diverts, composites and address settings as one JSON document,
like `rabbitmqctl export_definitions` (management/definitions.py says what it holds).

An import is idempotent: what exists identically is left, what exists otherwise is a conflict
(one line each on stderr, exit 1), the rest is created; it needs `manage` on every address the
file names. A file that is not a definitions document is refused with one line (exit 2)."""
from __future__ import annotations

import json
import sys

from .cli_errors import CliError
from .cli_manage import call

EXIT_CONFLICTS = 1


def cmd_export(args) -> int:
    document = call(args, "definitions.export")
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if args.file in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        with open(args.file, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CliError(f"{args.file}: {e.strerror or e}") from None
    print(f"exported {len(document['addresses'])} addresses, {len(document['queues'])} queues, "
          f"{len(document['diverts'])} diverts to {args.file}")
    return 0


def read_document(path: str):
    """The file's JSON; one line naming the file and the place otherwise."""
    try:
        with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as f:
            text = f.read()
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None
    try:
        document = json.loads(text)
    except ValueError as e:
        raise CliError(f"{path}: not JSON: {e}") from None
    if not isinstance(document, dict):
        raise CliError(f"{path}: a definitions file is a JSON object")
    return document


def cmd_import(args) -> int:
    result = call(args, "definitions.import", definitions=read_document(args.file))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"created {len(result['created'])}, unchanged {len(result['unchanged'])}, "
              f"conflicts {len(result['conflicts'])}")
        for line in result["created"]:
            print(f"created {line}")
    for line in result["conflicts"]:
        print(f"hermod: conflict: {line}", file=sys.stderr)
    return EXIT_CONFLICTS if result["conflicts"] else 0


def add_parsers(sub, common) -> None:
    definitions = sub.add_parser("definitions", help="export or import addresses, queues, diverts, settings") \
        .add_subparsers(dest="definitions_command", required=True)
    export = common(definitions.add_parser("export", help="write the definitions as JSON (default: stdout)"))
    export.add_argument("file", nargs="?", help="the file to write (default: stdout)")
    export.set_defaults(func=cmd_export)
    imp = common(definitions.add_parser("import", help="create what a definitions file has and the broker "
                                                       "lacks (exit 1 when some object conflicts)"))
    imp.add_argument("file", help="a file `definitions export` wrote (- for stdin)")
    imp.set_defaults(func=cmd_import)
