"""The TOML configuration file, read into frozen dataclasses.

Every table and key is optional; an unknown key or a value of the wrong type is a `ConfigError`
whose one-line message names the file and the key path (`address[0].queue[1].routing`), so
`hermod run` can print it and exit 2. No Proton and no SQL here.
"""
from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from .core.settings import FULL_POLICIES, ROUTING_TYPES, SETTING_NAMES
from .frontdoor.detect import PROTOCOLS

DEFAULT_STORE_URL = "sqlite:///hermod-data/hermod.db"
DEFAULT_HTTP_PORT = 8161


class ConfigError(Exception):
    """One clear line: what is wrong and where."""


# `hermod config check` names every bad key, not only the first: while a list is set here, a
# key's or an item's error is recorded and the rest of the table is still read.
_collected: ContextVar[list[str] | None] = ContextVar("config_errors", default=None)


def _record(error: ConfigError) -> None:
    """Raise `error`, or record it when collecting (the caller then skips the bad value)."""
    found = _collected.get()
    if found is None:
        raise error
    found.append(str(error))


# -- value checks ---------------------------------------------------------------------------------


def _check(pred: Callable[[Any], bool], what: str) -> Callable[[str, Any], Any]:
    def check(path: str, value: Any) -> Any:
        if not pred(value):
            raise ConfigError(f"{path}: expected {what}, got {value!r}")
        return value
    return check


_str = _check(lambda v: isinstance(v, str), "a string")
_bool = _check(lambda v: isinstance(v, bool), "true or false")
_int = _check(lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
_port = _check(lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 65535, "a port number 0-65535")
_positive = _check(lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer")
# AMQP's MIN-MAX-FRAME-SIZE: Proton would quietly advertise 512 for anything smaller.
_frame_size = _check(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 512,
                     "a frame size of at least 512 bytes")
_number = _check(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0, "a non-negative number")
_routing = _check(lambda v: v in ROUTING_TYPES, "one of anycast, multicast")
_routing_list = _check(lambda v: isinstance(v, list) and v and all(x in ROUTING_TYPES for x in v),
                       'a list of "anycast"/"multicast"')
_policy = _check(lambda v: v in FULL_POLICIES, "one of " + ", ".join(FULL_POLICIES))
_str_list = _check(lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings")
_divert_rt = _check(lambda v: v in ("anycast", "multicast", "pass", "strip"), "one of anycast, multicast, pass, strip")
_kind = _check(lambda v: v in ("queue", "topic"), "one of queue, topic")
_mechanisms = _check(lambda v: isinstance(v, list) and all(
    x in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "EXTERNAL", "ANONYMOUS") for x in v),
    "a list of SASL mechanisms (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, EXTERNAL, ANONYMOUS)")
_sync = _check(lambda v: v in ("FULL", "NORMAL", "OFF"), "one of FULL, NORMAL, OFF")

_DEFAULT_PORTS = {"http": "80", "ws": "80", "https": "443", "wss": "443"}


def normalize_origin(origin: str) -> str | None:
    """An origin (RFC 6454: scheme://host[:port], no path) in the form compared: lower case, the
    scheme's default port left out (browsers omit it); None when `origin` is not one."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or not rest or any(c in rest for c in "/?#@ "):
        return None
    host, colon, port = rest.rpartition(":") if not rest.endswith("]") else (rest, "", "")
    if not colon:
        host, port = rest, ""
    if not host or (colon and not port.isdigit()):
        return None
    return f"{scheme}://{host}" + (f":{int(port)}" if port and port != _DEFAULT_PORTS[scheme] else "")


def _origins(path: str, value: Any) -> tuple[str, ...]:
    """`allowed_origins`: the web pages (origins) whose browsers may open a WebSocket to a listener."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: expected a list of origins like \"https://app.example:8443\", got {value!r}")
    out = []
    for v in value:
        origin = normalize_origin(v)
        if origin is None:
            raise ConfigError(f"{path}: {v!r} is not an origin (scheme://host[:port], http or https, no path)")
        out.append(origin)
    return tuple(out)


def _table(path: str, value: Any, schema: dict[str, Callable], defaults: dict | None = None) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a table")
    out = dict(defaults or {})
    for key, v in value.items():
        check = schema.get(key)
        where = f"{path}.{key}" if path else key
        if check is None:
            _record(ConfigError(f"{where}: unknown key"))
            continue
        try:
            out[key] = check(where, v)
        except ConfigError as e:
            _record(e)
    return out


def _array(path: str, value: Any, item: Callable[[str, Any], Any]) -> list:
    if not isinstance(value, list):
        raise ConfigError(f"{path}: expected an array of tables ([[{path}]])")
    out = []
    for i, v in enumerate(value):
        try:
            out.append(item(f"{path}[{i}]", v))
        except ConfigError as e:
            _record(e)
    return out


# -- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 5672
    anycast_prefix: str = "anycast://"
    multicast_prefix: str = "multicast://"
    idle_timeout_s: float = 60
    max_frame_size: int = 1048576
    max_message_size: int = 104857600
    tls: bool = False
    event_loop: str = "asyncio"  # "asyncio" | "uvloop" (the `perf` extra) | "auto": uvloop when installed
    # [limits] what one client may hold, and the broker's tuning knobs (contract: Operations)
    max_connections: int = 10000
    max_sessions_per_connection: int = 256
    max_links_per_connection: int = 1024
    max_memory_mb: int | None = None  # None: a quarter of the machine's memory (core.flow)
    expiry_scan_ms: float = 5000
    transaction_timeout_s: float = 300  # 0: no timeout
    # [/limits]
    # Web pages whose browsers may open a WebSocket listener (the default of every [[listener]]);
    # an upgrade with another `Origin` is refused 403, one without `Origin` is not a browser's.
    allowed_origins: tuple[str, ...] = ()
    # The protocols every listener detects from a connection's first bytes (frontdoor/detect.py),
    # and how long a connection may take to send enough of them.
    protocols: tuple[str, ...] = PROTOCOLS
    detect_timeout_ms: float = 5000

    @property
    def anycast_prefixes(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.anycast_prefix.split(",") if p.strip())

    @property
    def multicast_prefixes(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.multicast_prefix.split(",") if p.strip())


@dataclass(frozen=True)
class ListenerConfig:
    """One place that accepts connections: the main one ([server]) or a [[listener]] entry."""
    name: str
    host: str
    port: int
    tls: bool = False
    websocket: bool = False
    max_frame_size: int = 1048576
    mechanisms: tuple[str, ...] | None = None  # None: [security] mechanisms
    allowed_origins: tuple[str, ...] = ()  # normalized (config.normalize_origin); websocket only
    protocols: tuple[str, ...] = PROTOCOLS
    detect_timeout_ms: float = 5000

    @property
    def scheme(self) -> str:
        """The readiness line's scheme: AMQP's where the listener speaks it, else its first
        protocol's (`openwire`, `stomp`, `mqtt`; `+tls` appended for TLS)."""
        if self.websocket:
            return "wss" if self.tls else "ws"
        if "amqp" in self.protocols:
            return "amqps" if self.tls else "amqp"
        return self.protocols[0] + ("+tls" if self.tls else "")


@dataclass(frozen=True)
class TlsConfig:
    cert: Path
    key: Path
    ca: Path | None = None
    client_certificates: str = "none"  # none | optional | required


@dataclass(frozen=True)
class StoreConfig:
    url: str = DEFAULT_STORE_URL
    sqlite_synchronous: str = "FULL"
    give_up_s: float = 30  # how long a unit waits for an unreachable database


@dataclass(frozen=True)
class HaConfig:
    """`[ha]` (contract, "High availability and bridges"). `node` names this broker to others
    (also when a second broker is refused the store lock); `announce` is how clients reach it,
    by default its main listener."""
    mode: str = "off"  # off | shared-store | cluster
    node: str | None = None
    lease_s: float = 5
    announce: str | None = None
    # cluster mode: the login a node forwards to the others with (SASL PLAIN; the password is
    # read from the environment variable, never the file), as [[bridge]] user / password_env
    cluster_user: str | None = None
    cluster_password_env: str | None = None

    @property
    def shared_store(self) -> bool:
        return self.mode == "shared-store"

    @property
    def cluster(self) -> bool:
        """Several live brokers on one PostgreSQL, each queue owned by one (docs/scale-out.md)."""
        return self.mode == "cluster"


@dataclass(frozen=True)
class HttpConfig:
    """`[http]`: the management API and metrics listener. `port` None: not set in the file, so
    8161, or 0 when the AMQP port is 0 (`effective_port`); -1: no HTTP listener."""
    host: str = "127.0.0.1"
    port: int | None = None
    tls: bool = False
    # Browsers: origins (scheme://host[:port]) besides the listener's own whose pages may call
    # the API, and Host names besides the listener's host, its arrival address and loopback
    # that requests may carry (anything else is a DNS-rebinding page: 421). http/origin.py.
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    # The whole head of a first request must arrive within this (slowloris). Not a file key:
    # only HERMOD_HTTP_HEAD_TIMEOUT_S changes it (tests shorten it).
    head_timeout_s: float = 10

    def effective_port(self, amqp_port: int) -> int:
        if self.port is not None:
            return self.port
        return 0 if amqp_port == 0 else DEFAULT_HTTP_PORT


@dataclass(frozen=True)
class QueueConfig:
    name: str
    routing: str = "anycast"
    durable: bool = True
    filter: str | None = None
    max_consumers: int = -1
    exclusive: bool = False
    last_value_key: str = ""


@dataclass(frozen=True)
class AddressConfig:
    name: str
    routing: tuple[str, ...] = ("anycast",)
    queues: tuple[QueueConfig, ...] = ()


@dataclass(frozen=True)
class BridgeConfig:
    """A [[bridge]]: forward a local queue to an address on another AMQP 1.0 broker."""
    name: str
    queue: str  # "queue", or "address::queue"
    url: str  # amqp://host[:port] or amqps://host[:port]
    address: str | None = None  # the remote target (default: the local queue's address)
    user: str | None = None  # SASL PLAIN when set
    password_env: str | None = None  # the environment variable holding the password


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    ha: HaConfig = field(default_factory=HaConfig)
    address_settings: tuple[tuple[str, dict], ...] = ()
    addresses: tuple[AddressConfig, ...] = ()
    diverts: tuple[dict, ...] = ()
    virtual_topics: tuple[dict, ...] = ()
    composites: tuple[dict, ...] = ()
    security: dict = field(default_factory=lambda: {"anonymous": True, "users": (), "permissions": ()})
    path: Path | None = None
    listeners: tuple[dict, ...] = ()  # [[listener]] as written; see extra_listeners()
    tls: TlsConfig | None = None
    bridges: tuple[BridgeConfig, ...] = ()

    def main_listener(self) -> ListenerConfig:
        s = self.server
        return ListenerConfig("main", s.host, s.port, s.tls, False, s.max_frame_size, None,
                              protocols=s.protocols, detect_timeout_ms=s.detect_timeout_ms)

    def extra_listeners(self) -> list[ListenerConfig]:
        """Every key a [[listener]] does not set is taken from [server]."""
        s = self.server
        return [ListenerConfig(l["name"], l.get("host", s.host), l.get("port", s.port), l.get("tls", s.tls),
                               l.get("websocket", False), l.get("max_frame_size", s.max_frame_size),
                               tuple(l["mechanisms"]) if "mechanisms" in l else None,
                               l.get("allowed_origins", s.allowed_origins),
                               tuple(l.get("protocols", s.protocols)), l.get("detect_timeout_ms", s.detect_timeout_ms))
                for l in self.listeners]


_above_zero = _check(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
                     "a number above 0")
_protocol_list = _check(lambda v: isinstance(v, list) and v and all(p in PROTOCOLS for p in v) and len(set(v)) == len(v),
                        'a non-empty list of "amqp", "openwire", "stomp", "mqtt" (each once)')


def _protocols(path: str, value: Any) -> tuple[str, ...]:
    return tuple(_protocol_list(path, value))
_SERVER_LIMITS = {"max_connections": _positive, "max_sessions_per_connection": _positive,
                  "max_links_per_connection": _positive, "max_memory_mb": _positive,
                  "expiry_scan_ms": _above_zero, "transaction_timeout_s": _number}
_SERVER = {"host": _str, "port": _port, "anycast_prefix": _str, "multicast_prefix": _str,
           "idle_timeout_s": _number, "max_frame_size": _frame_size, "max_message_size": _positive,
           "tls": _bool, "event_loop": _check(lambda v: v in ("asyncio", "uvloop", "auto"),
                                              "one of asyncio, uvloop, auto"),
           "allowed_origins": _origins, "protocols": _protocols, "detect_timeout_ms": _above_zero, **_SERVER_LIMITS}
_LISTENER = {"name": _str, "host": _str, "port": _port, "tls": _bool, "websocket": _bool,
             "max_frame_size": _frame_size, "mechanisms": _mechanisms, "allowed_origins": _origins,
             "protocols": _protocols, "detect_timeout_ms": _above_zero}
_TLS = {"cert": _str, "key": _str, "ca": _str,
        "client_certificates": _check(lambda v: v in ("none", "optional", "required"),
                                      "one of none, optional, required")}
_http_port = _check(lambda v: isinstance(v, int) and not isinstance(v, bool) and -1 <= v <= 65535,
                    "a port number 0-65535, or -1 for none")
_str_list = _check(lambda v: isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v),
                   "a list of non-empty strings")
_HTTP = {"host": _str, "port": _http_port, "tls": _bool, "allowed_origins": _str_list,
         "allowed_hosts": _str_list}
_HA = {"mode": _check(lambda v: v in ("off", "shared-store", "cluster"),
                      'one of "off", "shared-store", "cluster"'),
       "node": _check(lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
       "lease_s": _check(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1,
                         "a number of seconds, at least 1"),
       "announce": _check(lambda v: isinstance(v, str) and v.startswith(("amqp://", "amqps://")),
                          "an amqp:// or amqps:// URL"),
       "cluster_user": _str, "cluster_password_env": _str}


def _ha(path: str, value: Any) -> dict:
    t = _table(path, value, _HA)
    for key, other in (("cluster_user", "cluster_password_env"), ("cluster_password_env", "cluster_user")):
        if key in t and other not in t:
            raise ConfigError(f"{path}.{other}: required with {key}")
    return t
_STORE = {"url": _str, "sqlite_synchronous": _sync, "give_up_s": _above_zero}
_SETTINGS_TYPES = {
    "auto_create_addresses": _bool, "auto_create_queues": _bool, "auto_delete_queues": _bool,
    "auto_delete_addresses": _bool, "default_routing_type": _routing, "dead_letter_address": _str,
    "expiry_address": _str, "max_delivery_attempts": _int, "redelivery_delay_ms": _int,
    "max_size_bytes": _int, "address_full_policy": _policy, "retention_days": _int,
}
assert set(_SETTINGS_TYPES) == set(SETTING_NAMES), "config and core settings disagree"
_QUEUE = {"name": _str, "routing": _routing, "durable": _bool, "filter": _str, "max_consumers": _int,
          "exclusive": _bool, "last_value_key": _str}
_DIVERT = {"name": _str, "address": _str, "forwarding_address": _str, "filter": _str,
           "routing_type": _divert_rt, "exclusive": _bool, "transformer": _str}
_VIRTUAL_TOPIC = {"name": _str, "prefix": _str, "postfix": _str, "selector_aware": _bool,
                  "selector_cache": _bool}
_FORWARD = {"queue": _str, "topic": _str, "selector": _str}
_USER = {"name": _str, "password_hash": _str, "roles": _str_list}
_PERMISSION = {"match": _str, "send": _str_list, "consume": _str_list, "browse": _str_list,
               "create_address": _str_list, "create_durable_queue": _str_list,
               "delete_queue": _str_list, "manage": _str_list}


def _required(path: str, table: dict, *keys: str) -> None:
    for key in keys:
        if key not in table:
            raise ConfigError(f"{path}.{key}: required key missing")


def _address_settings(path: str, value: Any) -> tuple[str, dict]:
    t = _table(path, value, {"match": _str, **_SETTINGS_TYPES})
    _required(path, t, "match")
    match = t.pop("match")
    return match, t


def _queue(path: str, value: Any) -> QueueConfig:
    t = _table(path, value, _QUEUE)
    _required(path, t, "name")
    if t.get("filter"):
        _check_selector(f"{path}.filter", t["filter"])
    return QueueConfig(**t)


def _address(path: str, value: Any) -> AddressConfig:
    t = _table(path, value, {"name": _str, "routing": _routing_list,
                             "queue": lambda p, v: _array(p, v, _queue)})
    _required(path, t, "name")
    return AddressConfig(name=t["name"], routing=tuple(t.get("routing", ("anycast",))),
                         queues=tuple(t.get("queue", ())))


def _divert(path: str, value: Any) -> dict:
    t = _table(path, value, _DIVERT, {"routing_type": "strip", "exclusive": False})
    _required(path, t, "name", "address", "forwarding_address")
    if t.get("filter"):
        _check_selector(f"{path}.filter", t["filter"])
    return t


def _forward(path: str, value: Any) -> dict:
    t = _table(path, value, _FORWARD)
    if ("queue" in t) == ("topic" in t):
        raise ConfigError(f"{path}: needs exactly one of queue, topic")
    if t.get("selector"):
        _check_selector(f"{path}.selector", t["selector"])
    return t


def _composite(path: str, value: Any) -> dict:
    t = _table(path, value, {"name": _str, "kind": _kind, "forward_only": _bool,
                             "send_when_not_matched": _bool,
                             "forward": lambda p, v: _array(p, v, _forward)},
               {"kind": "queue", "forward_only": True, "send_when_not_matched": False, "forward": []})
    _required(path, t, "name")
    return t


def _virtual_topic(path: str, value: Any) -> dict:
    return _table(path, value, _VIRTUAL_TOPIC,
                  {"name": "VirtualTopic.>", "prefix": "Consumer.*.", "postfix": "",
                   "selector_aware": False, "selector_cache": False})


def _security(path: str, value: Any) -> dict:
    t = _table(path, value, {"anonymous": _bool, "mechanisms": _mechanisms,
                             "max_connections_per_user": _int, "audit_log": _str, "validate_user_id": _bool,
                             "user": lambda p, v: _array(p, v, lambda pp, vv: _table(pp, vv, _USER)),
                             "permission": lambda p, v: _array(p, v, lambda pp, vv: _table(pp, vv, _PERMISSION))},
               {"anonymous": True})
    for i, u in enumerate(t.get("user", ())):
        _required(f"{path}.user[{i}]", u, "name", "password_hash")
    for i, p in enumerate(t.get("permission", ())):
        _required(f"{path}.permission[{i}]", p, "match")
    return {"anonymous": t["anonymous"], "users": tuple(t.get("user", ())),
            "mechanisms": tuple(t.get("mechanisms", ("SCRAM-SHA-256", "PLAIN"))),
            "max_connections_per_user": t.get("max_connections_per_user", -1),
            "audit_log": t.get("audit_log"), "validate_user_id": t.get("validate_user_id", False),
            "permissions": tuple(t.get("permission", ()))}


def _listener(path: str, value: Any) -> dict:
    t = _table(path, value, _LISTENER)
    _required(path, t, "name")
    return t


_BRIDGE = {"name": _str, "queue": _str, "url": _str, "address": _str, "user": _str, "password_env": _str}


def _bridge(path: str, value: Any) -> BridgeConfig:
    from urllib.parse import urlsplit
    t = _table(path, value, _BRIDGE)
    _required(path, t, "name", "queue", "url")
    try:
        url = urlsplit(t["url"])
        url.port  # noqa: B018 - raises on a bad port
    except ValueError as e:
        raise ConfigError(f"{path}.url: {e}") from None
    if url.password:  # checked first: the other messages show the url
        raise ConfigError(f"{path}.url: no password in the url; name its environment variable in password_env")
    if url.scheme not in ("amqp", "amqps") or not url.hostname:
        raise ConfigError(f"{path}.url: expected amqp://HOST[:PORT] or amqps://HOST[:PORT], got {t['url']!r}")
    if "user" in t and "password_env" not in t:
        raise ConfigError(f"{path}.password_env: required with user")
    return BridgeConfig(**t)


def _check_selector(path: str, text: str) -> None:
    from .selector import SelectorError, compile_selector
    try:
        compile_selector(text)
    except SelectorError as e:
        raise ConfigError(f"{path}: invalid selector: {e}") from None


_TOP = {
    "server": lambda p, v: _table(p, v, _SERVER),
    "store": lambda p, v: _table(p, v, _STORE),
    "http": lambda p, v: _table(p, v, _HTTP),
    "ha": _ha,
    "address_settings": lambda p, v: _array(p, v, _address_settings),
    "address": lambda p, v: _array(p, v, _address),
    "divert": lambda p, v: _array(p, v, _divert),
    "virtual_topic": lambda p, v: _array(p, v, _virtual_topic),
    "composite": lambda p, v: _array(p, v, _composite),
    "security": _security,
    "listener": lambda p, v: _array(p, v, _listener),
    "tls": lambda p, v: _table(p, v, _TLS),
    "bridge": lambda p, v: _array(p, v, _bridge),
}


def parse(data: dict, path: Path | None = None) -> Config:
    t = _table("", data, _TOP)
    listeners = tuple(t.get("listener", ()))
    names = [l["name"] for l in listeners]
    for i, name in enumerate(names):
        if name in names[:i] or name == "main":
            raise ConfigError(f"listener[{i}].name: {name!r} is used twice (\"main\" is [server])")
    tls = None
    if "tls" in t:
        _required("tls", t["tls"], "cert", "key")
        base = path.parent if path is not None else Path.cwd()
        tls = TlsConfig(cert=base / t["tls"]["cert"], key=base / t["tls"]["key"],
                        ca=base / t["tls"]["ca"] if "ca" in t["tls"] else None,
                        client_certificates=t["tls"].get("client_certificates", "none"))
    security = t.get("security")
    if security is not None and security.get("audit_log"):
        security["audit_log"] = str((path.parent if path is not None else Path.cwd()) / security["audit_log"])
    bridge_names = [b.name for b in t.get("bridge", ())]
    for i, name in enumerate(bridge_names):
        if name in bridge_names[:i]:
            raise ConfigError(f"bridge[{i}].name: {name!r} is used twice")
    server_tls = t.get("server", {}).get("tls", False)
    for where, on in [("server.tls", server_tls)] + [(f"listener[{i}].tls", l.get("tls", server_tls))
                                                      for i, l in enumerate(listeners)]:
        if on and tls is None:
            raise ConfigError(f"{where}: TLS needs a [tls] table with cert and key")
    config = Config(
        server=ServerConfig(**t.get("server", {})),
        store=StoreConfig(**t.get("store", {})),
        http=HttpConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in t.get("http", {}).items()}),
        ha=HaConfig(**t.get("ha", {})),
        address_settings=tuple(t.get("address_settings", ())),
        addresses=tuple(t.get("address", ())),
        diverts=tuple(t.get("divert", ())),
        virtual_topics=tuple(t.get("virtual_topic", ())),
        composites=tuple(t.get("composite", ())),
        security=t.get("security", Config().security),
        path=path,
        listeners=listeners,
        tls=tls,
        bridges=tuple(t.get("bridge", ())),
    )
    if "url" in t.get("store", {}):
        check_ha(config)
    return config


def check_ha(config: Config) -> None:
    """Shared-store HA and cluster mode need a named node and a PostgreSQL store (their leases
    live on the database's clock). Run on the file, and again once the command line set the
    store."""
    ha = config.ha
    if not (ha.shared_store or ha.cluster):
        return
    if ha.node is None:
        raise ConfigError(f'ha.node: required with mode = "{ha.mode}"')
    if not config.store.url.strip().startswith("postgresql"):
        raise ConfigError(f'ha.mode: "{ha.mode}" needs a PostgreSQL store ([store] url = '
                          f'"postgresql+psycopg://..."), not {config.store.url.split(":", 1)[0]}')


# -- environment overrides ------------------------------------------------------------------------

# Variable -> (table, key, whether 0 is allowed). Read here and nowhere else, once, over the file
# (README "Operations"); the rest of the broker sees plain values in the Config.
ENVIRONMENT_OVERRIDES: dict[str, tuple[str, str, bool]] = {
    "HERMOD_STORE_GIVE_UP_S": ("store", "give_up_s", False),
    "HERMOD_TRANSACTION_TIMEOUT_S": ("server", "transaction_timeout_s", True),  # 0: no timeout
    "HERMOD_HTTP_HEAD_TIMEOUT_S": ("http", "head_timeout_s", False),
}


def apply_environment(config: Config, environ=None) -> Config:
    """`config` with the `HERMOD_*` overrides set in `environ` (default: the process's); a bad
    value is a ConfigError naming the variable and the value."""
    environ = os.environ if environ is None else environ
    for variable, (table, key, zero_ok) in ENVIRONMENT_OVERRIDES.items():
        raw = environ.get(variable)
        if not raw:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not (value >= 0 if zero_ok else value > 0):  # NaN fails both
            bound = "0 or above" if zero_ok else "above 0"
            raise ConfigError(f"{variable} must be a number of seconds {bound}, not {raw!r}")
        config = replace(config, **{table: replace(getattr(config, table), **{key: value})})
    return config


def check_file(path: str | Path) -> list[str]:
    """Every problem of the file, one line each (empty: it loads): `hermod config check`."""
    p = Path(path)
    found: list[str] = []
    token = _collected.set(found)
    try:
        config = load(p)
    except ConfigError as e:
        found.append(str(e))
        return [line if line.startswith(str(p)) else f"{p}: {line}" for line in found]
    finally:
        _collected.reset(token)
    if found:
        return [f"{p}: {line}" for line in found]
    try:
        check_ha(config)
    except ConfigError as e:
        return [f"{p}: {e}"]
    return []


def load(path: str | Path) -> Config:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read config file: {e.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: config file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from None
    try:
        return parse(data, p)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None
