"""ActiveMQ Classic `activemq.xml` (a Spring `<beans>` file or a bare `<broker>`) to Hermod's
config.

What maps: transport connectors (AMQP, OpenWire `tcp`/`ssl`/`nio`, `auto`, STOMP, MQTT, `ws`), each
a listener with the protocols it speaks (the first AMQP one is `[server]`), `<destinations>`, virtual
destinations (virtualTopic, compositeQueue, compositeTopic with filteredDestination and
forwardOnly), policy entries' dead-letter strategy, memory limit and flow control,
`persistent="false"`, `simpleAuthenticationPlugin` users and `authorizationEntries`.
Classic keeps queues and topics apart while Hermod has one namespace of addresses: queue and
topic entries for the same name become one entry (a note when they disagree); authorization
entries are merged the way Classic applies them (grants.py).
Classic sends dead and expired messages to `ActiveMQ.DLQ` unless a policy says otherwise; the
import writes that as the `#` address settings so that they end up where they did.
"""
from __future__ import annotations

import re
from pathlib import Path

from . import grants
from .common import ALL_PROTOCOLS, check_selector, listener_name, split_list
from .notes import Notes
from .users import user_entry
from .values import Placeholders, boolean, read_properties, size_bytes
from .xmlsafe import ImportFailed, Node

CLASSIC_DLQ = "ActiveMQ.DLQ"
_WHY = {
    "persistenceAdapter": "Hermod keeps messages in its [store] (SQLite or PostgreSQL)",
    "persistenceFactory": "Hermod keeps messages in its [store] (SQLite or PostgreSQL)",
    "systemUsage": "Hermod's memory limit is [server] max_memory_mb",
    "managementContext": "JMX: Hermod's management is HTTP/AMQP ([http])",
    "networkConnectors": "network of brokers: Hermod forwards with AMQP [[bridge]]s",
    "shutdownHooks": "Java shutdown hooks",
}
_GENERIC = "Hermod has no such setting"
# Classic's transport schemes by their base (what is left without `+nio`, `+ssl`): the protocols
# the connector speaks, and whether it is WebSocket. `tcp` is OpenWire; `auto` detects all four;
# `ws` carries STOMP and MQTT.
_SCHEMES = {"tcp": (["openwire"], False), "ssl": (["openwire"], False), "auto": (ALL_PROTOCOLS, False),
            "amqp": (["amqp"], False), "stomp": (["stomp"], False), "mqtt": (["mqtt"], False),
            "ws": (["stomp", "mqtt"], True), "wss": (["stomp", "mqtt"], True),
            "amqp+ws": (["amqp"], True), "amqp+wss": (["amqp"], True)}
_DEFAULT_PORTS = {"amqp": 5672, "openwire": 61616, "stomp": 61613, "mqtt": 1883}


def transport_scheme(scheme: str) -> tuple[list[str], bool, bool] | None:
    """(protocols, tls, websocket) of a Classic transport connector scheme; None: not one
    Hermod serves (vm, udp, http ...)."""
    parts = scheme.split("+")
    tls = "ssl" in parts or "wss" in parts or scheme == "ssl"
    base = "+".join(p for p in parts if p not in ("nio", "ssl")) or ("ssl" if scheme == "ssl" else "")
    found = _SCHEMES.get(base)
    if found is None:
        return None
    protocols, websocket = found
    return list(protocols), tls, websocket
_VT_DEFAULTS = {"local": "false", "concurrentSend": "false", "transactedSend": "false",
                "dropOnResourceLimit": "false", "setOriginalDestination": "true"}


def convert(root: Node, path: Path, notes: Notes) -> dict:
    broker = root if root.tag == "broker" else root.child("broker") if root.tag == "beans" else None
    if broker is None:
        hint = "; is it an Artemis broker.xml? try: hermod import artemis" if root.tag == "configuration" else ""
        raise ImportFailed(f"{path}: no ActiveMQ <broker> element (root is <{root.tag}>){hint}")
    conv = _Classic(path, notes)
    if broker is not root:
        for other in root.children:
            if other is not broker and other.tag == "bean" and "PropertyPlaceholderConfigurer" in other.attrib.get("class", ""):
                continue  # it only feeds ${...} values, which the import resolves itself
            if other is not broker:
                notes.skip(other, "Spring beans beside the broker are not part of Hermod's config")
    conv.run(broker)
    return conv.doc


def _placeholder_values(path: Path) -> dict[str, str]:
    """What `${...}` can resolve to here: `activemq.conf` is the file's directory, and the
    credentials.properties that the shipped activemq.xml loads from there."""
    known = {"activemq.conf": str(path.parent)}
    credentials = path.parent / "credentials.properties"
    if credentials.is_file():
        known.update(read_properties(credentials))
    return known


class _Classic:
    def __init__(self, path: Path, notes: Notes):
        self.path = path
        self.notes = notes
        self.values = Placeholders(_placeholder_values(path), notes)
        self.doc: dict = {}
        self.settings: dict[str, dict] = {}  # match -> Hermod address settings
        self.setting_source: dict[tuple[str, str], str] = {}

    def run(self, broker: Node) -> None:
        self.broker_attributes(broker)
        handlers = {"transportConnectors": self.connectors, "destinations": self.destinations,
                    "destinationInterceptors": self.interceptors, "destinationPolicy": self.policies,
                    "plugins": self.plugins}
        for el in broker.children:
            if el.tag in handlers:
                handlers[el.tag](el)
            else:
                self.notes.skip(el, _WHY.get(el.tag, _GENERIC))
        defaults = self.settings.setdefault("#", {})
        defaults.setdefault("dead_letter_address", CLASSIC_DLQ)
        defaults.setdefault("expiry_address", CLASSIC_DLQ)
        self.doc["address_settings"] = [{"match": m, **s} for m, s in self.settings.items() if s]

    def broker_attributes(self, broker: Node) -> None:
        if boolean(broker.attrib.get("persistent", "true")) is False:
            self.doc["store"] = {"url": "memory"}
        elif "dataDirectory" in broker.attrib:
            where = self.values.resolve(broker.attrib["dataDirectory"], broker.line, fallback="hermod-data")
            if where != "hermod-data":
                self.doc["store"] = {"url": f"sqlite:///{where.rstrip('/')}/hermod.db"}
        if boolean(broker.attrib.get("useVirtualTopics", "true")) is False:
            # Hermod's built-in VirtualTopic.> applies when none is configured: configure one
            # nothing matches instead.
            self.doc["virtual_topic"] = [{"#": ["useVirtualTopics=false in activemq.xml"],
                                          "name": "hermod.no-virtual-topics"}]

    # -- transport connectors ----------------------------------------------------------------

    def connectors(self, el: Node) -> None:
        for c in el.children:
            uri = self.values.resolve(c.attrib.get("uri", ""), c.line)
            m = re.match(r"^([\w+]+)://(\[[^\]]*\]|[^:/?]*)(?::(\d+))?/?(?:\?(.*))?$", (uri or "").strip())
            if c.tag != "transportConnector" or not m:
                self.notes.skip(c, "no usable uri")
                continue
            scheme = m.group(1).lower()
            served = transport_scheme(scheme)
            if served is None:
                self.notes.skip(c, f"its transport {scheme}:// is not one Hermod serves (it serves AMQP, OpenWire, "
                                   "STOMP and MQTT over TCP, TLS and WebSocket)")
                continue
            protocols, tls, websocket = served
            default_port = 61614 if websocket else _DEFAULT_PORTS.get(protocols[0], 61616) if len(protocols) == 1 \
                else 61616
            host, port = m.group(2).strip("[]") or "0.0.0.0", int(m.group(3) or default_port)
            params = dict(p.split("=", 1) if "=" in p else (p, "") for p in (m.group(4) or "").split("&") if p)
            listener: dict = {"host": host, "port": port}
            if protocols != ALL_PROTOCOLS:
                listener["protocols"] = protocols
            if websocket:
                listener["websocket"] = True
            if tls:
                listener["tls"] = True
                self.doc.setdefault("tls", {"cert": "server.crt", "key": "server.key"})
            dropped = []
            # The first connector that speaks AMQP is [server] (its readiness line names an amqp://
            # URL); without one, [server] keeps Hermod's defaults and every connector is a listener.
            main = "server" not in self.doc and "amqp" in protocols and not websocket
            broker_wide = []
            for key, value in params.items():
                if key in ("maximumConnections", "wireFormat.maxFrameSize") and not main:
                    broker_wide.append(key)
                elif key == "maximumConnections" and value.isdigit():
                    listener["max_connections"] = int(value)
                elif key == "wireFormat.maxFrameSize" and value.isdigit():
                    listener["max_message_size"] = int(value)
                elif key == "transport.transformer" or key.startswith("transport.") or key.startswith("wireFormat."):
                    pass  # OpenWire/JMS mapping and socket tuning: nothing a Hermod client sees
                else:
                    dropped.append(key)
            if main:
                listener["#"] = [f"transportConnector {c.attrib.get('name', '')!r} ({self.path.name} line {c.line})"]
                self.doc["server"] = listener
            else:
                self.doc.setdefault("listener", []).append(
                    {"name": listener_name(c.attrib.get("name", ""), self.doc), **listener})
            if tls:
                self.notes.note(c, "imported with TLS on, reading PEM files server.crt and server.key beside "
                                   "the config (export them from the Java key store)")
            elif dropped:
                self.notes.note(c, f"imported without {', '.join(dropped)} ({_GENERIC})")
            if broker_wide:
                self.notes.note(c, f"imported without {', '.join(broker_wide)} (Hermod's max_connections and "
                                   "max_message_size are the [server]'s, for every listener)")

    # -- destinations ------------------------------------------------------------------------

    def destinations(self, el: Node) -> None:
        for d in el.children:
            name = d.attrib.get("physicalName", "").strip()
            if d.tag not in ("queue", "topic") or not name or "," in name:
                self.notes.skip(d, "not a <queue>/<topic> with one physicalName")
                continue
            entry = self.address(name)
            routing = "anycast" if d.tag == "queue" else "multicast"
            if routing not in entry["routing"]:
                entry["routing"].append(routing)
            if d.tag == "queue" and not any(q["name"] == name for q in entry.get("queue", [])):
                entry.setdefault("queue", []).append({"name": name, "routing": "anycast"})

    def address(self, name: str) -> dict:
        for a in self.doc.setdefault("address", []):
            if a["name"] == name:
                return a
        entry = {"name": name, "routing": []}
        self.doc["address"].append(entry)
        return entry

    # -- virtual destinations ----------------------------------------------------------------

    def interceptors(self, el: Node) -> None:
        for i in el.children:
            vds = i.child("virtualDestinations") if i.tag == "virtualDestinationInterceptor" else None
            if vds is None:
                self.notes.skip(i, _GENERIC)
                continue
            for other in i.children:
                if other is not vds:
                    self.notes.skip(other, _GENERIC)
            for v in vds.children:
                {"virtualTopic": self.virtual_topic, "compositeQueue": self.composite,
                 "compositeTopic": self.composite}.get(v.tag, lambda n: self.notes.skip(n, _GENERIC))(v)
        if "virtual_topic" in self.doc and self.doc["virtual_topic"][0]["name"] == "hermod.no-virtual-topics":
            self.doc["virtual_topic"].pop(0)

    def virtual_topic(self, v: Node) -> None:
        a = v.attrib
        entry = {"name": a.get("name", ">"),
                 "prefix": a.get("prefix", "Consumer.*."), "postfix": a.get("postfix", "")}
        if boolean(a.get("selectorAware", "false")):
            entry["selector_aware"] = True
        dropped = [f"{k}={val}" for k, val in a.items() if k in _VT_DEFAULTS and _VT_DEFAULTS[k] != val.lower()]
        dropped += [k for k in a if k not in _VT_DEFAULTS and k not in ("name", "prefix", "postfix", "selectorAware")]
        self.doc.setdefault("virtual_topic", []).append(entry)
        if dropped:
            self.notes.note(v, f"imported without {', '.join(dropped)} ({_GENERIC})")

    def composite(self, v: Node) -> None:
        name = v.attrib.get("name", "").strip()
        if not name:
            self.notes.skip(v, "has no name")
            return
        entry: dict = {"name": name, "kind": "queue" if v.tag == "compositeQueue" else "topic",
                       "forward_only": boolean(v.attrib.get("forwardOnly", "true")) is not False,
                       "send_when_not_matched": bool(boolean(v.attrib.get("sendWhenNotMatched", "false")))}
        dropped = [k for k in v.attrib if k not in ("name", "forwardOnly", "sendWhenNotMatched",
                                                    "copyMessage", "concurrentSend")]
        forwards = []
        for group in v.children:
            if group.tag != "forwardTo":
                self.notes.skip(group, _GENERIC)
                continue
            for f in group.children:
                forward = self.forward(f)
                if forward is not None:
                    forwards.append(forward)
        if forwards:
            entry["forward"] = forwards
        self.doc.setdefault("composite", []).append(entry)
        if dropped:
            self.notes.note(v, f"imported without {', '.join(dropped)} ({_GENERIC})")

    def forward(self, f: Node) -> dict | None:
        if f.tag in ("queue", "topic") and f.attrib.get("physicalName"):
            return {f.tag: f.attrib["physicalName"]}
        if f.tag == "filteredDestination" and (("queue" in f.attrib) != ("topic" in f.attrib)):
            kind = "queue" if "queue" in f.attrib else "topic"
            out = {kind: f.attrib[kind]}
            selector = f.attrib.get("selector", "").strip()
            if selector:
                error = check_selector(selector)
                if error:
                    self.notes.skip(f, f"its selector does not parse here ({error})")
                    return None
                out["selector"] = selector
            return out
        self.notes.skip(f, "not a queue, topic or filteredDestination with one queue/topic")
        return None

    # -- destination policies ----------------------------------------------------------------

    def policies(self, el: Node) -> None:
        entries = [p for pm in el.all("policyMap") for group in pm.children for p in group.children]
        for other in el.children:
            if other.tag != "policyMap":
                self.notes.skip(other, _GENERIC)
        for p in entries:
            self.policy(p)

    def policy(self, p: Node) -> None:
        match = p.attrib.get("queue") or p.attrib.get("topic")
        if p.tag != "policyEntry" or not match:
            self.notes.skip(p, "not a policyEntry for a queue or topic")
            return
        match = _wildcards(match)
        found: dict = {}
        dropped = []
        memory = p.attrib.get("memoryLimit")
        if memory is not None and size_bytes(memory) is not None:
            found["max_size_bytes"] = size_bytes(memory)
            flow = boolean(p.attrib.get("producerFlowControl", "true"))
            found["address_full_policy"] = "block" if flow else "page"
        dropped += [f"{k}" for k in p.attrib if k not in ("queue", "topic", "memoryLimit", "producerFlowControl")]
        for child in p.children:
            if child.tag == "deadLetterStrategy" and len(child.children) == 1:
                dls = self.dead_letters(child.children[0], p.attrib.get("queue") or p.attrib.get("topic"))
                if dls is None:
                    dropped.append(f"<{child.children[0].tag}>")
                found.update(dls or {})
            else:
                dropped.append(f"<{child.tag}>")
        settings = self.settings.setdefault(match, {})
        clashes = [k for k, v in found.items() if k in settings and settings[k] != v]
        settings.update(found)
        if clashes:
            dropped.append(f"(Hermod has one namespace: this entry's {', '.join(clashes)} replaced the other entry's for {match})")
        if dropped:
            self.notes.note(p, f"imported without {', '.join(dropped)}" if found else
                            f"not imported: {', '.join(dropped)} ({_GENERIC})")

    def dead_letters(self, s: Node, destination: str) -> dict | None:
        """Classic sends expired messages to the dead-letter queue too (processExpired)."""
        if s.tag == "sharedDeadLetterStrategy":
            queue = s.child("deadLetterQueue")
            target = queue.children[0].attrib.get("physicalName") if queue is not None and queue.children else CLASSIC_DLQ
        elif s.tag == "individualDeadLetterStrategy" and not re.search(r"[*>]", destination):
            prefix = s.attrib.get("queuePrefix", "ActiveMQ.DLQ.Queue." if "queue" in s.attrib else "ActiveMQ.DLQ.")
            target = prefix + destination + s.attrib.get("queueSuffix", "")
        else:
            return None  # a per-destination DLQ for a wildcard: Hermod's settings name one address
        out = {"dead_letter_address": target}
        if boolean(s.attrib.get("processExpired", "true")) is not False:
            out["expiry_address"] = target
        return out

    # -- security ----------------------------------------------------------------------------

    def plugins(self, el: Node) -> None:
        section: dict = {}
        for p in el.children:
            if p.tag == "simpleAuthenticationPlugin":
                self.authentication(p, section)
            elif p.tag == "authorizationPlugin":
                entries = [e for m in p.all("map") for am in m.children for es in am.children
                           for e in es.children]
                section["permission"] = self.authorization(entries)
                if not section["permission"]:
                    # Classic's authorization with no entry allows nobody; Hermod with no
                    # permission allows everybody: one entry on # that grants no role instead.
                    section["permission"] = [{"match": "#"}]
                    self.notes.note(p, "has no authorizationEntry: Classic allows nothing, so the imported "
                                       "configuration allows nothing until permissions are written")
            else:
                self.notes.skip(p, _GENERIC)
        if section:
            self.doc["security"] = section

    def authentication(self, p: Node, section: dict) -> None:
        section["anonymous"] = bool(boolean(p.attrib.get("anonymousAccessAllowed", "false")))
        users = []
        for u in (x for group in p.children for x in group.children):
            name = u.attrib.get("username")
            if u.tag != "authenticationUser" or not name:
                self.notes.skip(u, _GENERIC)
                continue
            password = self.values.resolve(u.attrib.get("password", ""), u.line)
            note = lambda text, line=u.line: self.notes.say(line, text)  # noqa: E731
            users.append(user_entry(name, password, split_list(u.attrib.get("groups", "")), note))
        if users:
            section["user"] = users

    def authorization(self, entries: list[Node]) -> list[dict]:
        """read -> consume, browse; write -> send; admin -> create address and durable queues,
        delete queues. Classic's union of every matching entry, expressed in Hermod's most
        specific match (grants.py); what cannot be expressed exactly is one line, narrower."""
        classic: list[tuple[grants.ClassicEntry, Node]] = []
        for e in entries:
            kind = "queue" if e.attrib.get("queue") else "topic" if e.attrib.get("topic") else None
            if e.tag != "authorizationEntry" or kind is None:
                self.notes.skip(e, "temporary destinations: Hermod does not guard them" if "temp" in e.tag.lower()
                                else _GENERIC)
                continue
            target = e.attrib[kind]
            entry = grants.ClassicEntry(kind, _wildcards(target), f'{kind}="{target}"', e.line)
            for attr, ops in grants.RIGHTS.items():
                roles = frozenset(split_list(e.attrib.get(attr, "")))
                for op in ops:
                    entry.roles[op] = roles
            classic.append((entry, e))
        nodes = {id(entry): node for entry, node in classic}
        permissions, notes = grants.permissions([entry for entry, _ in classic])
        for entry, text in notes:
            self.notes.note(nodes[id(entry)], text)
        return permissions


def _wildcards(pattern: str) -> str:
    """Classic's `>` (any trailing words) is Hermod's `#`."""
    return ".".join("#" if w == ">" else w for w in pattern.split("."))
