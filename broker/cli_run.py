"""`hermod run`: the composition root. Builds the broker from its config in steps (the store
lease or cluster, the journal, the broker, listeners, HTTP, signals), announces readiness, serves
until stopped, and takes it all down in the reverse order. Each failure on the way up is one
`CliError` line (exit 2), with whatever was opened so far closed again."""
from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from . import config as config_mod
from .cli_errors import CliError

log = logging.getLogger("hermod")


# -- configuration --------------------------------------------------------------------------------


def load_config(args) -> config_mod.Config:
    """The config file (or the embedded default) with the command line's flags over it."""
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
        raise CliError(store_error(url, e)) from None


def store_error(url: str, error: BaseException) -> str:
    """One line about the store, never showing its password."""
    from hermod.store.engine import display_url
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    shown = display_url(url)
    return text if shown in text else f"store {shown}: {text}"


def shown_host(configured: str, bound: str) -> str:
    return configured if configured not in ("", "0.0.0.0", "::") else bound


# -- the command ----------------------------------------------------------------------------------


def cmd_run(args) -> int:
    cfg = load_config(args)
    os.umask(0o077)  # store, spool and audit files Hermod creates are its owner's only
    from .logging_setup import configure
    configure(args.log_level, args.log_format)
    with asyncio.Runner(loop_factory=_loop_factory(cfg.server.event_loop)) as runner:
        return runner.run(run(cfg, http_port=args.http_port, load=lambda: load_config(args)))


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


@dataclass
class Node:
    """What one run has opened so far, so each step can close what came before it."""
    cfg: config_mod.Config
    loop: asyncio.AbstractEventLoop
    http_port: int | None
    keeper: Any = None  # the store lease this broker holds while live ([ha] shared-store or cluster)
    cluster: Any = None
    broker: Any = None
    server: Any = None
    http: Any = None  # (HttpServer, url) or None
    purger: Any = None
    notifier: Any = None
    host: str = ""
    port: int = 0
    extra: list = field(default_factory=list)  # (name, scheme, host, port) of the extra listeners
    lost: list[str] = field(default_factory=list)  # why the lease was lost, if it was

    def resign(self) -> None:
        if self.keeper is not None:
            self.keeper.stop(resign=True)


async def run(cfg: config_mod.Config, http_port: int | None = None, load: Callable | None = None) -> int:
    """Compose, serve until stopped, take down; the exit status."""
    node = Node(cfg, asyncio.get_running_loop(), http_port)
    if cfg.ha.shared_store:
        became = await _wait_for_lease(cfg, http_port)
        if became is None:
            return 0  # stopped while a backup
        node.cfg, node.http_port, node.keeper = became
    await _open_broker(node)
    await _open_listeners(node)
    await _open_http(node)
    _install_signals(node, load)
    _settle_memory()
    _watch_lease(node)
    _announce(node)
    try:
        await node.server.serve_until_stopped()
    finally:
        node.notifier.stopping()
        node.notifier.close()
    return await _shut_down(node)


async def _open_broker(node: Node) -> None:
    """The journal (with the cluster's fence when clustered), then the broker, started, with its
    bridges."""
    from .app import Broker
    cfg, loop = node.cfg, node.loop
    node.cluster = _cluster(cfg) if cfg.ha.cluster else None  # [ha] mode = "cluster"
    try:
        journal = open_journal(cfg, loop.call_soon_threadsafe, defer=loop.call_soon,
                               lease=node.keeper and node.keeper.lease,
                               membership=node.cluster and node.cluster.membership)
    except CliError:
        node.resign()
        raise
    if node.cluster is not None:
        node.keeper = await _join_cluster(cfg, node.cluster, journal)

    def call_at(due_ms: int, fn):
        # Timers in wall-clock epoch ms (scheduled delivery times are), run by the loop.
        return loop.call_later(max(0.0, due_ms / 1000.0 - time.time()), fn)

    try:
        broker = Broker(cfg, journal=journal, defer=loop.call_soon, call_at=call_at)
    except config_mod.ConfigError:  # e.g. an audit log that cannot be opened: the store lock goes
        journal.close()
        node.resign()
        raise
    broker.cluster = node.cluster
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
    node.broker = broker


async def _open_listeners(node: Node) -> None:
    """TLS, the extra listeners, then the main one (whose port the readiness line names)."""
    from .protocol.server import Server
    cfg = node.cfg
    node.server = server = Server(node.broker, node.loop)
    main = cfg.main_listener()
    try:
        if cfg.tls is not None:
            from .protocol.tls import server_context
            server.tls_context = server_context(cfg.tls)
        for listener in cfg.extra_listeners():
            h, p = await _listen(server.start_listener(listener), listener)
            node.extra.append((listener.name, listener.scheme, shown_host(listener.host, h), p))
        node.host, node.port = await _listen(server.start(main.host, main.port, main), main)
    except (CliError, ValueError) as e:
        node.broker.close()
        raise CliError(str(e)) from None


async def _listen(starting, listener) -> tuple[str, int]:
    try:
        return await starting
    except OSError as e:
        starting.close()
        if e.errno == errno.EADDRINUSE:
            raise CliError(f"port {listener.port} on {listener.host} is already in use") from None
        raise CliError(f"cannot listen on {listener.host}:{listener.port}: {e.strerror or e}") from None


async def _open_http(node: Node) -> None:
    from .http.listener import HttpStartError, start_http
    try:
        node.http = await start_http(node.broker, node.cfg, node.http_port)
    except HttpStartError as e:
        await node.server.stop()
        raise CliError(str(e)) from None


def _install_signals(node: Node, load: Callable | None) -> None:
    """SIGTERM/SIGINT stop, SIGHUP reloads (`load` reads the config again), systemd hears of both;
    the retention purger starts (None unless some address retains messages in a database)."""
    from .reload import install_signals
    from .retention import start_purger
    from .systemd import Notifier
    cfg = node.cfg
    node.server.install_signal_handlers()
    node.notifier = Notifier()
    install_signals(node.loop, node.broker, node.server,
                    load or (lambda: config_mod.apply_environment(config_mod.load(cfg.path))), node.notifier)
    node.purger = start_purger(cfg)


def _settle_memory() -> None:
    """Everything built at start lives for the whole run: keep it out of the collector's way,
    and collect young objects less often (messages are short-lived, cycles are rare)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _watch_lease(node: Node) -> None:
    """With a lease (HA or cluster), losing it stops serving; a cluster node starts serving its
    share of the queues."""
    keeper, server = node.keeper, node.server
    if keeper is not None:
        def lease_lost(reason: str) -> None:
            log.error("%s; this broker stops serving", reason)
            node.lost.append(reason)
            server.request_stop(f"lost the store lease: {reason}")
        server.gate = keeper
        keeper.watch(node.loop, lease_lost)
    if node.cluster is not None:
        main = node.cfg.main_listener()
        node.cluster.serve(node.broker, node.loop,
                           f"{main.scheme}://{shown_host(node.cfg.server.host, node.host)}:{node.port}")


def _announce(node: Node) -> None:
    """The listeners' lines, the HTTP line, then the one readiness line (and systemd's READY)."""
    from .http.listener import print_http_ready
    from .protocol.server import print_listener, print_ready
    for name, scheme, h, p in node.extra:
        print_listener(name, scheme, h, p)
    if node.http is not None:
        print_http_ready(node.http[1])
    if not node.lost:
        scheme = node.cfg.main_listener().scheme
        host = shown_host(node.cfg.server.host, node.host)
        print_ready(host, node.port, scheme)
        node.notifier.ready(node.loop, f"listening on {scheme}://{host}:{node.port}")


async def _shut_down(node: Node) -> int:
    """HTTP, the purger, the lease (given up unless it was lost); exit 1 when the lease was lost,
    so a supervisor starts this node again (as a backup)."""
    if node.http is not None:
        await node.http[0].stop()
    if node.purger is not None:
        node.purger.stop()
    if node.keeper is not None:
        node.keeper.stop(resign=not node.lost)
    if node.lost:  # not a usage error: exit 1
        print(f"hermod: lost the store lease: {node.lost[0]}; stopped serving", file=sys.stderr)
        return 1
    return 0


# -- high availability -----------------------------------------------------------------------------


async def _wait_for_lease(cfg: config_mod.Config, http_port: int | None):
    """[ha] shared-store: serve as a backup until this broker holds the store lease."""
    from hermod import store

    from . import ha
    try:
        config_mod.check_ha(cfg)
        return await ha.become_live(cfg, http_port, shown_host)
    except config_mod.ConfigError as e:
        raise CliError(str(e)) from None
    except store.StoreError as e:
        raise CliError(store_error(cfg.store.url, e)) from None
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
        raise CliError(store_error(cfg.store.url, e)) from None
    return cluster.keeper
