"""The commands that work on files and the store rather than on a running broker: `config check`,
`db upgrade`, `user add|delete|list`, `systemd-unit`, `replay`, `analyse`, `import`, `completion`,
`manpage`."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import config as config_mod
from .cli_errors import EXIT_USAGE, CliError
from .cli_run import load_config, store_error

# -- config ---------------------------------------------------------------------------------------


def cmd_config_check(args) -> int:
    """Validate a config file without starting: every bad key and value, then what only a start
    would find (diverts and composites in a cycle, transformers, selectors, password hashes, TLS
    files, the audit log's directory). Nothing is created, opened for writing or listened on."""
    problems = config_mod.check_file(args.file)
    if not problems:
        problems = _start_problems(config_mod.load(args.file))
    for line in problems:
        print(f"hermod: {line}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    print(f"{args.file}: ok")
    return 0


def _start_problems(cfg: config_mod.Config) -> list[str]:
    from dataclasses import replace

    from .app import Broker
    problems = []
    audit = cfg.security.get("audit_log")
    if audit:
        folder = Path(audit).parent
        if not (folder.is_dir() and os.access(folder, os.W_OK)):
            problems.append(f"security.audit_log: cannot write in {folder}")
    if cfg.tls is not None:
        from .protocol.tls import server_context
        try:
            server_context(cfg.tls)
        except (OSError, ValueError) as e:
            problems.append(f"tls: {e}")
    quiet = replace(cfg, security={k: v for k, v in cfg.security.items() if k != "audit_log"})
    try:
        broker = Broker(quiet)  # the in-memory store: routing and security as a start builds them
        broker.start()
        broker.close()
    except Exception as e:  # noqa: BLE001 - whatever a start would refuse, as one line
        problems.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    return problems


def cmd_systemd_unit(args) -> int:
    from .systemd import unit_file
    sys.stdout.write(unit_file(args.exec, args.config, args.user, args.watchdog_sec))
    return 0


def cmd_completion(args) -> int:
    from .cli_docs import completion
    from .cli import build_parser
    sys.stdout.write(completion(build_parser(), args.shell))
    return 0


def cmd_manpage(args) -> int:
    from .cli_docs import manpage
    from .cli import build_parser
    sys.stdout.write(manpage(build_parser()))
    return 0


# -- db -------------------------------------------------------------------------------------------


def cmd_db_upgrade(args) -> int:
    cfg = load_config(args)
    os.umask(0o077)  # a store file this creates is its owner's only
    url = cfg.store.url
    if url == "memory":
        print("store is 'memory': nothing to upgrade")
        return 0
    from hermod import store
    from hermod.store.engine import display_url
    try:
        store.schema.upgrade(url)
    except store.StoreError as e:
        raise CliError(store_error(url, e)) from None
    print(f"store {display_url(url)} is at the current schema")
    return 0


# -- user -----------------------------------------------------------------------------------------


def _new_password(args) -> str:
    """From --password, from stdin (--password-stdin: its first line), or asked twice on a
    terminal; never echoed."""
    if args.password is not None:
        return args.password
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        import getpass
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the passwords do not match")
    else:
        raise CliError("give --password, --password-stdin, or run on a terminal to be asked")
    if not password:
        raise CliError("the password is empty")
    return password


def cmd_user_add(args) -> int:
    from .security.passwords import add_user
    add_user(Path(args.config), args.name, _new_password(args), args.role)
    print(f"added user {args.name}")
    return 0


def cmd_user_delete(args) -> int:
    from .security.passwords import delete_user
    delete_user(Path(args.config), args.name)
    print(f"deleted user {args.name}")
    return 0


def cmd_user_list(args) -> int:
    from .security.passwords import list_users
    for name, roles in list_users(Path(args.config)):
        print(f"{name} {','.join(roles)}")
    return 0


# -- data pipeline --------------------------------------------------------------------------------


def cmd_replay(args) -> int:
    from .replay import ReplayError, parse_time, replay
    cfg = load_config(args)
    if cfg.store.url == "memory":
        raise CliError("replay needs a database store (--store URL or [store] url in --config)")
    host = cfg.server.host if cfg.server.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    url = args.url or f"amqp://{host}:{cfg.server.port}"
    from hermod import store

    from .tools.progress import Progress
    progress = Progress(f"replay {args.address}", True if args.progress else None)
    try:
        sent = replay(cfg.store.url, url, args.address, parse_time(args.from_time),
                      parse_time(args.to_time), selector=args.filter, to_address=args.to_address,
                      on_sent=progress.update if progress.enabled else None)
    except ReplayError as e:
        raise CliError(str(e)) from None
    except store.StoreError as e:
        raise CliError(store_error(cfg.store.url, e)) from None
    progress.update(sent, final=True)
    print(f"replayed {sent} messages")
    return 0


SPARK_OUTSIDE_THE_FILE = ("hermod analyse runs on Apache Spark, which the one-file build does not include "
                          "(Spark needs a Java runtime anyway): install the Python package with "
                          "`pipx install 'hermod-broker[spark]'` and run its `hermod analyse`")


def cmd_analyse(args) -> int:
    if getattr(sys, "frozen", False):  # the PyInstaller one-file build (make dist)
        raise CliError(SPARK_OUTSIDE_THE_FILE)
    from hermod.pipeline.analyse import AnalyseError, run
    try:
        run(args)
    except AnalyseError as e:
        raise CliError(str(e)) from None
    print(f"analysis written to {args.out}")
    return 0


def cmd_import(args) -> int:
    from .tools.importer import run
    return run(args.product, args.file, args.output, True if args.progress else None)


# -- parsers --------------------------------------------------------------------------------------


def add_run_parsers(sub, log_level: str = "info") -> None:
    """`run`, `systemd-unit`, `config check`, `db upgrade`, `user ...` (their order in --help)."""
    from .cli_run import cmd_run
    run = sub.add_parser("run", help="run the broker in the foreground")
    run.add_argument("--config", help="TOML configuration file")
    run.add_argument("--host", help="listen on this address (overrides [server] host)")
    run.add_argument("--port", type=int, help="the main listener's port; 0 picks a free one")
    run.add_argument("--data", help="data directory: the SQLite store is DIR/hermod.db")
    run.add_argument("--http-port", type=int, help="HTTP management/metrics port (0: any free one, -1: none)")
    run.add_argument("--store", help=argparse.SUPPRESS)
    run.add_argument("--log-level", default=log_level,
                     help="debug, info, warning or error (default $HERMOD_LOG_LEVEL, else info)")
    run.add_argument("--log-format", choices=("auto", "json", "text"), default="auto",
                     help="stderr logs: JSON lines or plain text (auto: JSON unless on a terminal)")
    run.set_defaults(func=cmd_run)

    unit = sub.add_parser("systemd-unit", help="print a systemd unit file (Type=notify)")
    unit.add_argument("--config", default="/etc/hermod/hermod.toml", help="the config file it runs with")
    unit.add_argument("--user", default="hermod", help="the account it runs as")
    unit.add_argument("--exec", help="the hermod executable (default: the one on PATH)")
    unit.add_argument("--watchdog-sec", type=int, default=30, help="WatchdogSec")
    unit.set_defaults(func=cmd_systemd_unit)

    conf = sub.add_parser("config", help="configuration files").add_subparsers(dest="config_command", required=True)
    chk = conf.add_parser("check", help="validate a config file without starting (names every problem)")
    chk.add_argument("file")
    chk.set_defaults(func=cmd_config_check)

    db = sub.add_parser("db", help="store schema").add_subparsers(dest="db_command", required=True)
    up = db.add_parser("upgrade", help="apply the store's migrations")
    up.add_argument("--config")
    up.add_argument("--store", help="store URL (overrides the config file)")
    up.set_defaults(func=cmd_db_upgrade)

    user = sub.add_parser("user", help="users").add_subparsers(dest="user_command", required=True)
    add = user.add_parser("add", help="add a user to the config file")
    add.add_argument("--config", required=True)
    add.add_argument("name")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument("--password")
    secret.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    add.add_argument("--role", action="append", required=True)
    add.set_defaults(func=cmd_user_add)
    delete = user.add_parser("delete", help="remove a user from the config file")
    delete.add_argument("--config", required=True)
    delete.add_argument("name")
    delete.set_defaults(func=cmd_user_delete)
    lst = user.add_parser("list", help="the users of the config file and their roles")
    lst.add_argument("--config", required=True)
    lst.set_defaults(func=cmd_user_list)


def add_data_parsers(sub) -> None:
    """`replay`, `analyse`, `import`, `completion`, `manpage`."""
    rep = sub.add_parser("replay", help="re-send retained messages of an address")
    rep.add_argument("--address", required=True)
    rep.add_argument("--from", dest="from_time", required=True, metavar="T1")
    rep.add_argument("--to", dest="to_time", required=True, metavar="T2")
    rep.add_argument("--filter", help="selector the messages must match")
    rep.add_argument("--to-address", help="send to this address instead")
    rep.add_argument("--config")
    rep.add_argument("--store", help="store URL (overrides the config file)")
    rep.add_argument("--url", help="the broker (default: the config's [server])")
    rep.add_argument("--progress", action="store_true", help="a progress line on stderr even when it is not a terminal")
    rep.set_defaults(func=cmd_replay)

    ana = sub.add_parser("analyse", help="the analytics job on Spark")
    from hermod.pipeline.analyse import add_arguments as add_analyse_arguments
    add_analyse_arguments(ana)
    ana.set_defaults(func=cmd_analyse)

    imp = sub.add_parser("import", help="convert an Artemis broker.xml or ActiveMQ activemq.xml to TOML")
    imp.add_argument("product", choices=["artemis", "activemq"])
    imp.add_argument("file", help="broker.xml (Artemis) or activemq.xml (ActiveMQ Classic)")
    imp.add_argument("-o", "--output", help="write the TOML here (default: stdout)")
    imp.add_argument("--progress", action="store_true", help="a progress line on stderr even when it is not a terminal")
    imp.set_defaults(func=cmd_import)

    comp = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    comp.add_argument("shell", choices=("bash", "zsh"))
    comp.set_defaults(func=cmd_completion)
    man = sub.add_parser("manpage", help="print the man page (roff): hermod manpage > hermod.1")
    man.set_defaults(func=cmd_manpage)
