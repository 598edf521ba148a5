"""Turns a link's source or target, as the client wrote it, into a core request: capabilities,
address prefixes, fully qualified queue names, subscription naming, filters.

Reading the terminus goes through Proton's data objects: this is the cold path (once per attach).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import cproton
from cproton_ffi import lib
from .binding import Described, dat2obj

from ..core import errors, limits
from ..core.address import split_fqqn
from ..core.message import ANYCAST, MULTICAST

SELECTOR_DESCRIPTORS = (0x0000468C00000004, "apache.org:selector-filter:string",
                        # the OASIS AMQP Filter Expressions draft (filtex csd01): same SQL-92 syntax
                        0x120, "amqp:sql-filter")
# Keys whose value is taken as a selector even when it is a plain string, not described:
# some clients (and older qpid-jms) write the text bare under the name.
SELECTOR_KEYS = ("jms-selector", "apache.org:selector-filter:string")
NO_LOCAL_DESCRIPTORS = (0x0000468C00000003, "apache.org:no-local-filter:list")
QUEUE_CAPABILITIES = {"queue": ANYCAST, "temporary-queue": ANYCAST,
                      "topic": MULTICAST, "temporary-topic": MULTICAST}
ALWAYS_PREFIXES = (("queue://", ANYCAST), ("topic://", MULTICAST))


@dataclass(slots=True)
class Terminus:
    """A source or target as the peer sent it, in plain Python values."""

    address: str | None
    capabilities: list[str] = field(default_factory=list)
    dynamic: bool = False
    durable: bool = False
    expiry_policy: str = "session-end"
    timeout: int = 0  # seconds the terminus outlives the start of its expiry (§3.5.3)
    distribution_mode: str | None = None
    filters: dict = field(default_factory=dict)
    # The selector filter found among `filters`: its key and value as sent (echoed back as it
    # came), and its text.
    selector: tuple[object, object, str] | None = None
    coordinator: bool = False
    present: bool = True


_EXPIRY = {lib.PN_EXPIRE_WITH_LINK: "link-detach", lib.PN_EXPIRE_WITH_SESSION: "session-end",
           lib.PN_EXPIRE_WITH_CONNECTION: "connection-close", lib.PN_EXPIRE_NEVER: "never"}
_DISTRIBUTION = {lib.PN_DIST_MODE_COPY: "copy", lib.PN_DIST_MODE_MOVE: "move"}


def read_terminus(t) -> Terminus:
    kind = lib.pn_terminus_get_type(t)
    caps = dat2obj(lib.pn_terminus_capabilities(t))
    if caps is None:
        caps = []
    elif isinstance(caps, (str, bytes)):
        caps = [caps]
    filters = dat2obj(lib.pn_terminus_filter(t)) if kind == lib.PN_SOURCE else None
    filters = filters if isinstance(filters, dict) else {}
    selector = find_selector(filters)
    if selector is not None:
        limits.check_selector(selector[2])
    return Terminus(
        address=cproton.pn_terminus_get_address(t),
        capabilities=[str(c) for c in caps],
        dynamic=bool(lib.pn_terminus_is_dynamic(t)),
        durable=lib.pn_terminus_get_durability(t) != lib.PN_NONDURABLE,
        expiry_policy=_EXPIRY.get(lib.pn_terminus_get_expiry_policy(t), "session-end"),
        timeout=lib.pn_terminus_get_timeout(t),
        distribution_mode=_DISTRIBUTION.get(lib.pn_terminus_get_distribution_mode(t)),
        filters=filters,
        selector=selector,
        coordinator=kind == lib.PN_COORDINATOR,
        present=kind != lib.PN_UNSPECIFIED,
    )


@dataclass(slots=True)
class Name:
    address: str
    routing_type: str | None
    queue: str | None


def parse_name(raw: str, capabilities: list[str], anycast_prefixes: tuple[str, ...],
               multicast_prefixes: tuple[str, ...], *, composite: bool = False) -> Name:
    """Routing type from the capability first, then the address prefix; `a::q` splits off a queue.
    Address and queue names over the length limit are refused (amqp:invalid-field), except in
    the whole text of a `composite`, whose parts are parsed (and checked) one by one."""
    if composite:
        limits.check_composite_length(raw)
    rt = None
    for cap in capabilities:
        rt = QUEUE_CAPABILITIES.get(cap)
        if rt is not None:
            break
    address = raw
    prefixes = [(p, ANYCAST) for p in anycast_prefixes if p] + [(p, MULTICAST) for p in multicast_prefixes if p]
    for prefix, prefix_rt in (*prefixes, *ALWAYS_PREFIXES):
        if address.startswith(prefix):
            address = address[len(prefix):]
            rt = rt or prefix_rt
            break
    address, queue = split_fqqn(address)
    if not composite:
        limits.check_name(address)
        limits.check_name(queue, "queue")
    return Name(address, rt, queue)


def address_options(address: str) -> tuple[str, dict[str, str]]:
    """`orders?consumer-priority=5&consumer.exclusive=true` -> ("orders", {...}): the query
    options ActiveMQ clients put on a destination name."""
    base, sep, query = address.partition("?")
    if not sep:
        return address, {}
    options = {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key:
            options[key] = value
    return base, options


def consumer_priority(options: dict[str, str]) -> int | None:
    try:
        return int(options["consumer-priority"])
    except (KeyError, ValueError):
        return None


def subscription_queue_name(container_id: str | None, link_name: str, *, shared: bool,
                            global_: bool, durable: bool) -> str:
    """Artemis's default naming of a multicast subscription queue (its AMQP protocol manager's rules)."""
    name = link_name
    if shared:
        name = name.split("|", 1)[0]
    if container_id and not global_:
        name = f"{container_id}.{name}"
    if shared:
        if not durable:
            name += ":shared-volatile"
        if global_:
            name += ":global"
    limits.check_name(name, "subscription queue (container id and link name)")
    return name


def find_filter(filters: dict, descriptors: tuple) -> tuple[object, object] | None:
    """(key, described value) of the first filter with one of `descriptors`."""
    for key, value in filters.items():
        if isinstance(value, Described) and value.descriptor in descriptors:
            return key, value
    return None


def find_selector(filters: dict) -> tuple[object, object, str] | None:
    """(key, value as sent, text) of the selector filter: a value described by one of
    SELECTOR_DESCRIPTORS under any key, or a bare string under one of SELECTOR_KEYS. A
    selector that is not a string is refused (amqp:invalid-field)."""
    found = find_filter(filters, SELECTOR_DESCRIPTORS)
    if found is not None:
        text = found[1].value
    else:
        key = next((k for k in filters if not isinstance(filters[k], Described) and str(k) in SELECTOR_KEYS), None)
        if key is None:
            return None
        found = (key, filters[key])
        text = found[1]
    if not isinstance(text, str):
        raise errors.InvalidField(f"selector filter {found[0]} is not a string")
    return found[0], found[1], text


def split_composite(raw: str) -> list[str]:
    """`a, b,topic://c` -> ["a", "b", "topic://c"]: trimmed, empties skipped, duplicates removed
    (ActiveMQ Classic's client-side composite destinations; Hermod keeps the order). Linear in
    the text; more than MAX_COMPOSITE_PARTS parts are refused (amqp:resource-limit-exceeded)
    before any queue is made for them."""
    limits.check_composite_length(raw)
    parts = dict.fromkeys(p for p in (part.strip() for part in raw.split(",")) if p)
    limits.check_composite_parts(len(parts))
    return list(parts)
