"""Definitions: the broker's topology as one JSON document, like RabbitMQ's definitions
(`hermod definitions export|import`, `GET|POST /api/definitions`).

    {"hermod_version": "...", "addresses": [{"name", "routing_types"}],
     "queues": [{"name", "address", "routing_type", "durable", "filter", "max_consumers",
                 "exclusive", "last_value_key"}],
     "diverts": [[[divert]] tables], "composites": [[[composite]] tables],
     "address_settings": [{"match", ...settings}]}

Addresses and queues are made at run time and kept in the store; the export holds those an
operator or the configuration made (not temporary queues, subscriptions or virtual-topic queues,
which belong to the clients that made them). Diverts, composites and address settings are
configuration (the TOML file, applied by a reload): an import compares them with the running
configuration and reports each one that is missing or differs, rather than making state a
reload would silently drop.

An import is idempotent: an object that exists identically is left, one that exists otherwise is
a conflict (reported, left as it is), the rest are created. It needs what creating each object
needs (`manage` on the address), for every object in the file, checked before anything is made.
An export shows only what the caller may browse.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import __version__
from ..core.kinds import QueuePurpose
from ..core.message import ANYCAST, MULTICAST
from .errors import BadRequest
from .ports import Deferred

View = Callable[[str], bool] | None

# Queues an export holds: what an operator, the configuration or a send made.
EXPORTED_PURPOSES = frozenset({QueuePurpose.CONFIGURED, QueuePurpose.AUTO, QueuePurpose.DEAD_LETTER})
SECTIONS = ("addresses", "queues", "diverts", "composites", "address_settings")
QUEUE_DEFAULTS = {"routing_type": ANYCAST, "durable": True, "filter": None, "max_consumers": -1,
                  "exclusive": False, "last_value_key": None}


def _visible(view: View, *addresses: str) -> bool:
    return view is None or all(view(a) for a in addresses)


def _divert_targets(d: dict) -> list[str]:
    return [a.strip() for a in d["forwarding_address"].split(",") if a.strip()]


def _composite_targets(c: dict) -> list[str]:
    return [fw.get("queue") or fw.get("topic") for fw in c.get("forward", ())]


def queue_definition(q) -> dict:
    return {"name": q.name, "address": q.address.name, "routing_type": q.routing_type, "durable": q.durable,
            "filter": q.filter_text, "max_consumers": q.max_consumers, "exclusive": q.exclusive,
            "last_value_key": q.last_value_key or None}


def export(broker, view: View) -> dict:
    po, cfg = broker.postoffice, broker.config
    return {
        "hermod_version": __version__,
        "addresses": [{"name": a.name, "routing_types": sorted(a.routing_types)}
                      for a in sorted(po.addresses.values(), key=lambda a: a.name)
                      if not a.temporary and _visible(view, a.name)],
        "queues": [queue_definition(q) for q in sorted(po.queues.values(), key=lambda q: q.name)
                   if not q.temporary and q.purpose in EXPORTED_PURPOSES and _visible(view, q.address.name)],
        "diverts": [dict(d) for d in cfg.diverts if _visible(view, d["address"], *_divert_targets(d))],
        "composites": [dict(c) for c in cfg.composites if _visible(view, c["name"], *_composite_targets(c))],
        "address_settings": [{"match": match, **values} for match, values in cfg.address_settings
                             if _visible(view, match)],
    }


# -- import ------------------------------------------------------------------------------------------


def _entries(document: dict, section: str) -> list[dict]:
    entries = document.get(section, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BadRequest(f"definitions: '{section}' must be a list of objects")
    return entries


def _field(entry: dict, where: str, key: str, kind: type | tuple, required: bool = False):
    value = entry.get(key)
    if value is None:
        if required:
            raise BadRequest(f"definitions: {where}.{key} is required")
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"definitions: {where}.{key} has the wrong type")
    return value


def parse(document: Any) -> dict:
    """The document checked and normalised; BadRequest (one line naming the place) otherwise."""
    if not isinstance(document, dict):
        raise BadRequest("definitions: the document must be a JSON object")
    unknown = sorted(set(document) - set(SECTIONS) - {"hermod_version"})
    if unknown:
        raise BadRequest(f"definitions: unknown key {unknown[0]!r}")
    addresses = []
    for i, a in enumerate(_entries(document, "addresses")):
        where = f"addresses[{i}]"
        name = _field(a, where, "name", str, required=True)
        types = _field(a, where, "routing_types", list) or [ANYCAST]
        if not types or not all(t in (ANYCAST, MULTICAST) for t in types):
            raise BadRequest(f"definitions: {where}.routing_types must list anycast/multicast")
        addresses.append({"name": name, "routing_types": sorted(set(types))})
    queues = []
    for i, q in enumerate(_entries(document, "queues")):
        where = f"queues[{i}]"
        name = _field(q, where, "name", str, required=True)
        queue = {"name": name, "address": _field(q, where, "address", str) or name}
        for key, kind in (("routing_type", str), ("durable", bool), ("filter", str), ("max_consumers", int),
                          ("exclusive", bool), ("last_value_key", str)):
            value = _field(q, where, key, kind)
            queue[key] = QUEUE_DEFAULTS[key] if value is None else value
        if queue["routing_type"] not in (ANYCAST, MULTICAST):
            raise BadRequest(f"definitions: {where}.routing_type must be anycast or multicast")
        queue["filter"] = queue["filter"] or None
        queue["last_value_key"] = queue["last_value_key"] or None
        queues.append(queue)
    diverts = _entries(document, "diverts")
    for i, d in enumerate(diverts):
        for key in ("name", "address", "forwarding_address"):
            _field(d, f"diverts[{i}]", key, str, required=True)
    composites = _entries(document, "composites")
    for i, c in enumerate(composites):
        _field(c, f"composites[{i}]", "name", str, required=True)
        _field(c, f"composites[{i}]", "forward", list)
    settings = _entries(document, "address_settings")
    for i, s in enumerate(settings):
        _field(s, f"address_settings[{i}]", "match", str, required=True)
    return {"addresses": addresses, "queues": queues, "diverts": diverts, "composites": composites,
            "address_settings": settings}


def touched(parsed: dict) -> list[str]:
    """Every address the document would create or change (each needs `manage`)."""
    out = [a["name"] for a in parsed["addresses"]] + [q["address"] for q in parsed["queues"]]
    for d in parsed["diverts"]:
        out += [d["address"], *_divert_targets(d)]
    for c in parsed["composites"]:
        out += [c["name"], *[t for t in _composite_targets(c) if isinstance(t, str)]]
    out += [s["match"] for s in parsed["address_settings"]]
    return list(dict.fromkeys(out))


class Importer:
    """Applies a parsed document to the running broker; `answer()` resolves once every object it
    made is stored, with `{"created", "unchanged", "conflicts"}` (lists of "kind name" lines)."""

    def __init__(self, broker, compile_filter: Callable[[str | None], Any]):
        self.broker = broker
        self.po = broker.postoffice
        self.compile_filter = compile_filter
        self.created: list[str] = []
        self.unchanged: list[str] = []
        self.conflicts: list[str] = []
        self._waiting = 1  # released by answer(): nothing resolves before every object is asked
        self._error: BaseException | None = None
        self._answer = Deferred()

    def run(self, parsed: dict) -> Deferred:
        for i, q in enumerate(parsed["queues"]):  # a bad selector refuses the whole file (400) first
            try:
                self.compile_filter(q["filter"])
            except BadRequest as e:
                raise BadRequest(f"definitions: queues[{i}].filter ({q['name']}): {e}") from None
        for a in parsed["addresses"]:
            self._address(a)
        for q in parsed["queues"]:
            self._queue(q)
        self._configuration(parsed)
        self._stored(None)
        return self._answer

    def _address(self, a: dict) -> None:
        existing = self.po.addresses.get(a["name"])
        what = f"address {a['name']}"
        if existing is None:
            self._waiting += 1
            self.po.create_address(a["name"], set(a["routing_types"]), stored=self._stored)
            self.created.append(what)
        elif sorted(existing.routing_types) == a["routing_types"]:
            self.unchanged.append(what)
        else:
            self.conflicts.append(f"{what}: exists with routing types {','.join(sorted(existing.routing_types))}")

    def _queue(self, q: dict) -> None:
        existing = self.po.queues.get(q["name"])
        what = f"queue {q['name']}"
        if existing is None:
            queue = self.po.create_queue(q["name"], q["address"], q["routing_type"], durable=q["durable"],
                                         filter_text=q["filter"], max_consumers=q["max_consumers"],
                                         exclusive=q["exclusive"], last_value_key=q["last_value_key"])
            self._waiting += 1
            queue.when_persisted(lambda _queue, error: self._stored(error))
            self.created.append(what)
            return
        have = queue_definition(existing)
        differs = [k for k in q if have.get(k) != q[k]]
        if differs:
            self.conflicts.append(f"{what}: exists with another {', '.join(differs)}")
        else:
            self.unchanged.append(what)

    def _configuration(self, parsed: dict) -> None:
        cfg = self.broker.config
        for section, kind, running, key in (
                ("diverts", "divert", cfg.diverts, "name"), ("composites", "composite", cfg.composites, "name"),
                ("address_settings", "address settings", [{"match": m, **v} for m, v in cfg.address_settings],
                 "match")):
            have = {entry[key]: entry for entry in running}
            for entry in parsed[section]:
                what = f"{kind} {entry[key]}"
                found = have.get(entry[key])
                if found is not None and _same(found, entry):
                    self.unchanged.append(what)
                elif found is None:
                    self.conflicts.append(f"{what}: not in the running configuration "
                                          "(add it to the config file and reload)")
                else:
                    self.conflicts.append(f"{what}: differs from the running configuration")

    def _stored(self, error: BaseException | None) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._waiting -= 1
        if self._waiting == 0:
            self._answer.resolve(None if self._error else {"created": self.created, "unchanged": self.unchanged,
                                                           "conflicts": self.conflicts}, self._error)


def _same(running: dict, imported: dict) -> bool:
    """A configuration entry equals the imported one (JSON has lists where the config has tuples,
    and an export leaves defaults as the running config shows them)."""
    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(running) == plain(imported)
