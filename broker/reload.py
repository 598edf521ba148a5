"""SIGHUP: read the configuration file again and apply what can change while clients stay connected.

Two phases, so that an invalid file changes nothing: `prepare` reads and checks everything (TOML,
keys, selectors, password hashes, transformers, forwarding cycles, TLS files) and builds the new
objects; only then `apply` swaps them in, on the loop thread, in one go. Open connections and
links carry on, except what the new file takes away (protocol/revocation.py): a removed user's
connections close, a link whose right was removed is detached, and a connection whose client
certificate no longer verifies against a changed `[tls] ca` closes. A new user logs in on the
next connection.

What applies: addresses and queues (new ones are created), address settings, diverts,
composites, virtual topics, security users and permissions, the TLS certificate, and the
`[server]` limits read per connection. What needs a restart (listeners, store, HTTP, the main
host/port/TLS switch, the memory limit, the expiry scan period, the audit log file) keeps its
running value and is named in one log line.

Addresses and queues removed from the file stay, as in ActiveMQ Artemis with its default
`config-delete-addresses` / `config-delete-queues` policy (OFF): they may hold messages, and the
management API deletes them when that is meant. Queues already present are not altered either.
"""
from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, fields, replace
from typing import Callable

from . import routing
from .config import Config, ConfigError
from .core.errors import HermodError
from .routing import RoutingConfigError
from .security.auth import Authenticator
from .security.permissions import Permissions

log = logging.getLogger("hermod.reload")

# [server] keys the listeners or the core read once at start.
_SERVER_RESTART_KEYS = ("host", "port", "tls", "max_memory_mb", "expiry_scan_ms", "allowed_origins")


@dataclass
class Prepared:
    config: Config  # what the broker will run with (restart-only keys keep their running values)
    restart_keys: list[str]
    auth: Authenticator
    permissions: Permissions
    virtual_topics: list
    settings: object
    diverts: list | None  # None: diverts and composites unchanged


class ReloadError(Exception):
    """The new file cannot be applied; the running configuration stays (one line)."""


def restart_keys(old: Config, new: Config) -> list[str]:
    """The changed keys that only a restart applies, as config paths."""
    out = [f"server.{k}" for k in _SERVER_RESTART_KEYS if getattr(old.server, k) != getattr(new.server, k)]
    out += [f"store.{f.name}" for f in fields(old.store) if getattr(old.store, f.name) != getattr(new.store, f.name)]
    out += [f"http.{f.name}" for f in fields(old.http) if getattr(old.http, f.name) != getattr(new.http, f.name)]
    if old.listeners != new.listeners:
        out.append("listener")
    if (old.tls is None) != (new.tls is None) or (
            old.tls is not None and old.tls.client_certificates != new.tls.client_certificates):
        out.append("tls")
    if old.security.get("audit_log") != new.security.get("audit_log"):
        out.append("security.audit_log")
    return out


def _running(old: Config, new: Config) -> Config:
    """`new` with the restart-only keys set back to what runs."""
    server = replace(new.server, **{k: getattr(old.server, k) for k in _SERVER_RESTART_KEYS})
    security = dict(new.security, audit_log=old.security.get("audit_log"))
    tls = new.tls if (old.tls is not None and new.tls is not None) else old.tls
    if tls is not None and old.tls is not None:
        tls = replace(tls, client_certificates=old.tls.client_certificates)
    return replace(new, server=server, store=old.store, http=old.http, listeners=old.listeners,
                   tls=tls, security=security)


def prepare(broker, load: Callable[[], Config]) -> Prepared:
    """Read and check everything; raises ReloadError and changes nothing."""
    from .app import address_settings
    old = broker.config
    try:
        new = load()
        auth = Authenticator(new.security)
        permissions = Permissions(new.security.get("permissions", ()))
        virtual_topics = routing.virtual_topics(new)
        diverts = None
        if (new.diverts, new.composites) != (old.diverts, old.composites):
            diverts = broker.build_diverts(new)
        if new.tls is not None:
            from .protocol.tls import server_context
            server_context(new.tls)  # the files load: the running context takes them in apply
    except (ConfigError, RoutingConfigError, HermodError, ValueError, TypeError) as e:
        raise ReloadError(str(e)) from None
    running = _running(old, new)
    return Prepared(running, restart_keys(old, new), auth, permissions, virtual_topics,
                    address_settings(running, virtual_topics), diverts)


def apply(broker, server, p: Prepared) -> None:
    """Swap the prepared configuration in (loop thread; nothing here can fail on user input)."""
    po = broker.postoffice
    po.replace_settings(p.settings)
    broker.virtual_topics = p.virtual_topics
    _adopt_users(broker.auth, p.auth)
    broker.permissions = p.permissions
    broker.validate_user_id = p.config.security.get("validate_user_id", False)
    broker.create_configured(p.config)
    if p.diverts is not None:
        for d in broker.diverts:
            po.remove_divert(d)
        broker.diverts = routing.install(po, p.config, p.diverts)
    old = broker.config
    broker.config = p.config
    check = None
    if server is not None and server.tls_context is not None and p.config.tls is not None:
        from .protocol.tls import certificate_check, reload as reload_certificates
        if reload_certificates(server, p.config.tls):
            check = certificate_check(p.config.tls)
    if server is not None:
        _revoke(server, check)
    for gone in _removed_addresses(old, p.config):
        log.info("address %s is no longer in the configuration file: kept (delete it through "
                 "management to remove it)", gone)


def _revoke(server, check) -> None:
    """What the new users, permissions and CA no longer allow is closed or detached now."""
    from .protocol.revocation import revoke
    try:
        revoke(server, check[0] if check is not None else None)
    except Exception:  # noqa: BLE001 - the new configuration is in place: say so, never stop here
        log.exception("configuration reload: revoking what it no longer allows failed")
    finally:
        if check is not None:
            check[1].close()


def _adopt_users(auth: Authenticator, new: Authenticator) -> None:
    """The new users, mechanisms and limits; the running counts (connections per user, failed
    logins per host) carry on."""
    auth.users = new.users
    auth.anonymous = new.anonymous
    auth.mechanisms = new.mechanisms
    auth.max_connections = new.max_connections


def _removed_addresses(old: Config, new: Config) -> list[str]:
    kept = {a.name for a in new.addresses}
    return [a.name for a in old.addresses if a.name not in kept]


def reload(broker, server, load: Callable[[], Config], notifier=None) -> bool:
    """The SIGHUP handler's work: True when the new configuration was applied."""
    if broker.config.path is None:
        log.warning("configuration reload asked (SIGHUP) but the broker runs without a config file")
        return False
    if notifier is not None:
        notifier.reloading()
    try:
        try:
            prepared = prepare(broker, load)
        except ReloadError as e:
            log.error("configuration reload failed, the running configuration stays: %s", e)
            return False
        apply(broker, server, prepared)
        if prepared.restart_keys:
            log.warning("configuration reload: these keys need a restart and keep their running "
                        "values: %s", ", ".join(prepared.restart_keys))
        log.info("configuration reloaded from %s", broker.config.path)
        return True
    finally:
        if notifier is not None:
            notifier.reloaded()


def install_signals(loop, broker, server, load: Callable[[], Config], notifier=None) -> None:
    """SIGHUP reloads; SIGTERM and SIGINT tell systemd STOPPING=1, then stop gracefully.
    Installed after the server's own handlers, which these replace."""
    def stop(reason: str) -> None:
        if notifier is not None:
            notifier.stopping()
        server.request_stop(reason)

    handlers = ((signal.SIGHUP, lambda: reload(broker, server, load, notifier)),
                (signal.SIGTERM, lambda: stop("SIGTERM received")), (signal.SIGINT, lambda: stop("SIGINT received")))
    for sig, handler in handlers:
        try:
            loop.add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError):
            pass
