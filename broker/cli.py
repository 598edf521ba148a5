"""`hermod` command line: parse, call one function, print one clear line and exit 2 on error."""
from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from . import config as config_mod

EXIT_USAGE = 2
log = logging.getLogger("hermod")


class CliError(Exception):
    """A one-line error for the user; exit status 2."""


def _fail(message: str) -> int:
    print(f"hermod: {message}", file=sys.stderr)
    return EXIT_USAGE


# -- run ----------------------------------------------------------------------------------------


def _load_config(args) -> config_mod.Config:
    cfg = config_mod.load(args.config) if getattr(args, "config", None) else config_mod.Config()
    server = cfg.server
    if getattr(args, "host", None):
        server = replace(server, host=args.host)
    if getattr(args, "port", None) is not None:
        server = replace(server, port=args.port)
    store = cfg.store
    data_dir = getattr(args, "data", None)
    file_sets_url = cfg.path is not None and _file_sets_store_url(cfg.path)
    if data_dir and not file_sets_url:
        store = replace(store, url=f"sqlite:///{Path(data_dir).resolve() / 'hermod.db'}")
    if getattr(args, "store", None):
        store = replace(store, url=args.store)
    return config_mod.apply_environment(replace(cfg, server=server, store=store))


def _file_sets_store_url(path: Path) -> bool:
    import tomllib
    try:
        return "url" in tomllib.loads(path.read_text()).get("store", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False


def open_journal(cfg: config_mod.Config, post, lease=None, membership=None, defer=None):
    """The store for `cfg` (upgraded to the current schema), or the in-memory journal."""
    url = cfg.store.url
    if url == "memory":
        from .core.postoffice import MemoryJournal
        return MemoryJournal()
    from hermod import store
    try:
        return store.open_journal(url, post, sqlite_synchronous=cfg.store.sqlite_synchronous,
                                  fail_after_s=cfg.store.give_up_s, holder=cfg.ha.node, lease=lease,
                                  membership=membership, defer=defer)
    except store.StoreError as e:
        raise CliError(_store_error(url, e)) from None


def _store_error(url: str, error: BaseException) -> str:
    """One line about the store, never showing its password."""
    from hermod.store.engine import display_url
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    shown = display_url(url)
    return text if shown in text else f"store {shown}: {text}"


def cmd_run(args) -> int:
    cfg = _load_config(args)
    os.umask(0o077)  # store, spool and audit files Hermod creates are its owner's only
    from .logging_setup import configure
    configure(args.log_level, args.log_format)
    with asyncio.Runner(loop_factory=_loop_factory(cfg.server.event_loop)) as runner:
        return runner.run(_run(cfg, http_port=args.http_port, load=lambda: _load_config(args)))


def _loop_factory(choice: str):
    """`[server] event_loop`: None (asyncio's own loop), or uvloop's (`pip install hermod-broker[perf]`)."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise CliError('[server] event_loop = "uvloop" but uvloop is not installed '
                           "(pip install 'hermod-broker[perf]')") from None
        return None
    return uvloop.new_event_loop


async def _run(cfg: config_mod.Config, http_port: int | None = None, load=None) -> int:
    from .app import Broker
    from .protocol.server import Server, print_listener, print_ready
    from .reload import install_signals
    from .systemd import Notifier

    loop = asyncio.get_running_loop()
    keeper = None  # [ha] shared-store: the lease this broker holds while it is live
    if cfg.ha.shared_store:
        became = await _wait_for_lease(cfg, http_port)
        if became is None:
            return 0  # stopped while a backup
        cfg, http_port, keeper = became
    cluster = _cluster(cfg) if cfg.ha.cluster else None  # [ha] mode = "cluster"
    try:
        journal = open_journal(cfg, loop.call_soon_threadsafe, defer=loop.call_soon, lease=keeper and keeper.lease,
                               membership=cluster and cluster.membership)
    except CliError:
        if keeper is not None:
            keeper.stop(resign=True)
        raise
    if cluster is not None:
        keeper = await _join_cluster(cfg, cluster, journal)
    def call_at(due_ms: int, fn):
        # Timers in wall-clock epoch ms (scheduled delivery times are), run by the loop.
        return loop.call_later(max(0.0, due_ms / 1000.0 - time.time()), fn)

    try:
        broker = Broker(cfg, journal=journal, defer=loop.call_soon, call_at=call_at)
    except config_mod.ConfigError:  # e.g. an audit log that cannot be opened: the store lock goes
        journal.close()
        if keeper is not None:
            keeper.stop(resign=True)
        raise
    broker.cluster = cluster
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - a start-up failure is one line, not a traceback
        broker.close()
        raise CliError(f"cannot start: {e}") from None
    if cfg.bridges:
        from .bridge import BridgeError, start_bridges
        try:
            broker.bridges = start_bridges(broker, loop)
        except BridgeError as e:
            broker.close()
            raise CliError(str(e)) from None
    server = Server(broker, loop)
    main = cfg.main_listener()
    ready = []
    try:
        if cfg.tls is not None:
            from .protocol.tls import server_context
            server.tls_context = server_context(cfg.tls)
        for listener in cfg.extra_listeners():
            h, p = await _listen(server.start_listener(listener), listener)
            ready.append((listener.name, listener.scheme, _shown_host(listener.host, h), p))
        host, port = await _listen(server.start(main.host, main.port, main), main)
    except (CliError, ValueError) as e:
        broker.close()
        raise CliError(str(e)) from None
    from .http.listener import HttpStartError, print_http_ready, start_http
    try:
        http = await start_http(broker, cfg, http_port)
    except HttpStartError as e:
        await server.stop()
        raise CliError(str(e)) from None
    server.install_signal_handlers()
    notifier = Notifier()
    install_signals(loop, broker, server, load or (lambda: config_mod.apply_environment(config_mod.load(cfg.path))), notifier)
    from .retention import start_purger
    purger = start_purger(cfg)  # None unless some address retains messages in a database
    # Everything built at start lives for the whole run: keep it out of the collector's way,
    # and collect young objects less often (messages are short-lived, cycles are rare).
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    lost: list[str] = []
    if keeper is not None:
        def lease_lost(reason: str) -> None:
            log.error("%s; this broker stops serving", reason)
            lost.append(reason)
            server.request_stop(f"lost the store lease: {reason}")
        server.gate = keeper
        keeper.watch(loop, lease_lost)
    if cluster is not None:
        cluster.serve(broker, loop, f"{main.scheme}://{_shown_host(cfg.server.host, host)}:{port}")
    for name, scheme, h, p in ready:
        print_listener(name, scheme, h, p)
    if http is not None:
        print_http_ready(http[1])
    if not lost:
        print_ready(_shown_host(cfg.server.host, host), port, main.scheme)
        notifier.ready(loop, f"listening on {main.scheme}://{_shown_host(cfg.server.host, host)}:{port}")
    try:
        await server.serve_until_stopped()
    finally:
        notifier.stopping()
        notifier.close()
    if http is not None:
        await http[0].stop()
    if purger is not None:
        purger.stop()
    if keeper is not None:
        keeper.stop(resign=not lost)
    if lost:  # not a usage error: exit 1, so a supervisor starts it again (as a backup)
        print(f"hermod: lost the store lease: {lost[0]}; stopped serving", file=sys.stderr)
        return 1
    return 0


async def _wait_for_lease(cfg: config_mod.Config, http_port: int | None):
    """[ha] shared-store: serve as a backup until this broker holds the store lease."""
    from . import ha
    from hermod import store
    try:
        config_mod.check_ha(cfg)
        return await ha.become_live(cfg, http_port, _shown_host)
    except config_mod.ConfigError as e:
        raise CliError(str(e)) from None
    except store.StoreError as e:
        raise CliError(_store_error(cfg.store.url, e)) from None
    except OSError as e:
        raise CliError(f"cannot listen on {cfg.server.host}:{cfg.server.port}: {e.strerror or e}") from None


def _cluster(cfg: config_mod.Config):
    """[ha] mode = "cluster": this node, not yet joined (its fence goes into the journal)."""
    from hermod.store.engine import display_url, make_engine
    from .cluster import Cluster
    from .cluster_forward import LoginError
    try:
        config_mod.check_ha(cfg)
    except config_mod.ConfigError as e:
        raise CliError(str(e)) from None
    engine = make_engine(cfg.store.url)
    try:
        return Cluster(cfg, engine, display_url(engine.url))
    except LoginError as e:
        engine.dispose()
        raise CliError(str(e)) from None


async def _join_cluster(cfg: config_mod.Config, cluster, journal):
    """Join, claim this node's share of the queues; the LeaseKeeper that renews the node."""
    from hermod import store
    try:
        await asyncio.get_running_loop().run_in_executor(None, cluster.join)
    except store.StoreError as e:
        journal.close()
        raise CliError(_store_error(cfg.store.url, e)) from None
    return cluster.keeper


async def _listen(starting, listener) -> tuple[str, int]:
    try:
        return await starting
    except OSError as e:
        starting.close()
        if e.errno == errno.EADDRINUSE:
            raise CliError(f"port {listener.port} on {listener.host} is already in use") from None
        raise CliError(f"cannot listen on {listener.host}:{listener.port}: {e.strerror or e}") from None


def _shown_host(configured: str, bound: str) -> str:
    return configured if configured not in ("", "0.0.0.0", "::") else bound


def cmd_systemd_unit(args) -> int:
    from .systemd import unit_file
    sys.stdout.write(unit_file(args.exec, args.config, args.user, args.watchdog_sec))
    return 0


def version() -> str:
    """The installed distribution's version (package metadata), else the source tree's."""
    from importlib import metadata
    try:
        return metadata.version("hermod-broker")
    except metadata.PackageNotFoundError:
        from . import __version__
        return __version__


# -- db -------------------------------------------------------------------------------------------


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


def cmd_completion(args) -> int:
    from .cli_docs import completion
    sys.stdout.write(completion(build_parser(), args.shell))
    return 0


def cmd_manpage(args) -> int:
    from .cli_docs import manpage
    sys.stdout.write(manpage(build_parser()))
    return 0


def cmd_db_upgrade(args) -> int:
    cfg = _load_config(args)
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
        raise CliError(_store_error(url, e)) from None
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


# -- clients --------------------------------------------------------------------------------------


def _target(args):
    """The broker a client command talks to, and as whom (tools/target.py)."""
    from .tools.target import Target
    return Target.from_args(args)


def cmd_producer(args) -> int:
    from .tools.clients import produce
    from .cli_manage import _properties
    sent = produce(_target(args), args.address, count=args.count, size=args.size, durable=args.durable,
                   topic=args.topic, body=args.body, properties=_properties(args.property))
    print(f"sent {sent} message{'' if sent == 1 else 's'} to {args.address}")
    return 0


def cmd_consumer(args) -> int:
    from .tools.clients import consume
    got = consume(_target(args), args.address, count=args.count, selector=args.selector, topic=args.topic,
                  durable=args.durable, client_id=args.client_id, quiet=args.quiet,
                  timeout=args.timeout)
    print(f"received {got} messages from {args.address}")
    return 0


def cmd_queue_stat(args) -> int:
    from .tools.clients import management_call
    target = _target(args)
    rows = management_call(target, "queue.stat")
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
    for line in bridge_rows(management_call(target, "bridge.stat")):
        print(line)
    return 0


def cmd_perf(args) -> int:
    from .tools.perf import main as perf_main
    return perf_main(args)


# -- data pipeline ----------------------------------------------------------------------------------


def cmd_replay(args) -> int:
    from .replay import ReplayError, parse_time, replay
    cfg = _load_config(args)
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
        raise CliError(_store_error(cfg.store.url, e)) from None
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


# -- parser ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hermod", description="Hermod AMQP 1.0 message broker")
    p.add_argument("--version", action="version", version=f"hermod {version()}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the broker in the foreground")
    run.add_argument("--config", help="TOML configuration file")
    run.add_argument("--host", help="listen on this address (overrides [server] host)")
    run.add_argument("--port", type=int, help="the main listener's port; 0 picks a free one")
    run.add_argument("--data", help="data directory: the SQLite store is DIR/hermod.db")
    run.add_argument("--http-port", type=int, help="HTTP management/metrics port (0: any free one, -1: none)")
    run.add_argument("--store", help=argparse.SUPPRESS)
    run.add_argument("--log-level", default=os.environ.get("HERMOD_LOG_LEVEL", "info"),
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
    from .cli_manage import add_parsers as add_management_parsers
    add_management_parsers(sub, queue)

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

    perf = sub.add_parser("perf", help="load generator")
    from .tools.perf import add_arguments
    add_arguments(perf)
    perf.set_defaults(func=cmd_perf)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CliError, config_mod.ConfigError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
    except ConnectionError as e:
        from .tools.clients import Refused
        return _fail(str(e) if isinstance(e, Refused) else f"connection failed: {e}")
    except Exception as e:  # noqa: BLE001 - a client command's refusal is one line; anything else is a bug
        from .tools.clients import refusal_line
        line = refusal_line(e)
        if line is None:
            raise
        return _fail(line)


if __name__ == "__main__":
    sys.exit(main())
