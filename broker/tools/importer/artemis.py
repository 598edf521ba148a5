"""ActiveMQ Artemis `broker.xml` (and the users/roles properties beside it) to Hermod's config.

What maps: acceptors, with the protocols they speak of AMQP, OpenWire, STOMP and MQTT (the first
that speaks AMQP is `[server]`, the others `[[listener]]`; Core and HornetQ are left out),
`<addresses>` with their queues, `<address-settings>`, `<diverts>`, `<security-settings>`,
users and roles from `artemis-users.properties` / `artemis-roles.properties`, a guest login
from `login.config`, `persistence-enabled=false` (the memory store). Everything else is one note.
"""
from __future__ import annotations

import re
from pathlib import Path

from .notes import Notes
from .users import user_entry
from .values import Placeholders, boolean, integer, read_properties, size_bytes
from .xmlsafe import ImportFailed, Node
from .common import ALL_PROTOCOLS, check_selector, listener_name, split_list

_STORAGE = "Hermod keeps messages in its [store] (SQLite or PostgreSQL)"
_CLUSTER = "clustering: Hermod has shared-store HA ([ha]) and AMQP [[bridge]]s"
_WHY = {
    **{t: _STORAGE for t in (
        "bindings-directory", "journal-directory", "large-messages-directory", "paging-directory",
        "journal-type", "journal-datasync", "journal-min-files", "journal-pool-files",
        "journal-file-size", "journal-buffer-timeout", "journal-buffer-size", "journal-max-io",
        "journal-compact-min-files", "journal-compact-percentage", "journal-sync-transactional",
        "journal-sync-non-transactional", "journal-device-block-size", "journal-retention-directory",
        "journal-file-open-timeout", "journal-lock-acquisition-timeout", "page-sync-timeout",
        "store", "create-bindings-dir", "create-journal-dir", "page-max-concurrent-io",
        "read-whole-page", "max-disk-usage", "disk-scan-period", "minimum-disk-free")},
    **{t: _CLUSTER for t in (
        "connectors", "cluster-connections", "broadcast-groups", "discovery-groups", "ha-policy",
        "cluster-user", "cluster-password", "bridges", "broker-connections", "federations",
        "grouping-handler")},
    "global-max-size": "Hermod's memory limit is [server] max_memory_mb (default a quarter of RAM)",
    "security-setting-plugin": "security plugins: Hermod's users and permissions are in [security]",
    "wildcard-addresses": "Hermod's wildcards are fixed ('.', '*', '#')",
    "queues": "the legacy <queues> list (before Artemis 2.0); write them under <addresses>",
}
_GENERIC = "Hermod has no such setting"

_SETTINGS = {  # Artemis address-setting element -> (Hermod key, conversion)
    "dead-letter-address": ("dead_letter_address", str.strip),
    "expiry-address": ("expiry_address", str.strip),
    "max-delivery-attempts": ("max_delivery_attempts", integer),
    "redelivery-delay": ("redelivery_delay_ms", integer),
    "max-size-bytes": ("max_size_bytes", size_bytes),
    "address-full-policy": ("address_full_policy",
                            lambda t: t.strip().lower() if t.strip().lower() in ("page", "block", "fail", "drop") else None),
    "auto-create-addresses": ("auto_create_addresses", boolean),
    "auto-create-queues": ("auto_create_queues", boolean),
    "auto-delete-queues": ("auto_delete_queues", boolean),
    "auto-delete-addresses": ("auto_delete_addresses", boolean),
    "default-address-routing-type": ("default_routing_type",
                                     lambda t: t.strip().lower() if t.strip().lower() in ("anycast", "multicast") else None),
}

_PERMISSIONS = {"send": "send", "consume": "consume", "browse": "browse", "manage": "manage",
                "createAddress": "create_address", "createDurableQueue": "create_durable_queue",
                "deleteDurableQueue": "delete_queue"}
_PERMISSION_WHY = {
    "createNonDurableQueue": "Hermod does not guard non-durable queues (a consumer may subscribe)",
    "deleteNonDurableQueue": "Hermod does not guard non-durable queues (they go with their consumer)",
    "deleteAddress": "Hermod has no delete-address permission (deleting an address is 'manage')",
}

# Security on and no security-setting: Artemis allows nothing. Hermod with no permission entry
# allows everything, so the import writes one entry that matches every address and grants no role.
NOTHING_ALLOWED = {"#": ["Artemis had no <security-setting>: nothing is allowed until permissions are",
                         "written here (see [[security.permission]] in Hermod's configuration)"],
                   "match": "#"}

# Artemis queue attributes with their defaults: a default value needs no note.
_QUEUE_DEFAULTS = {"purge-on-no-consumers": "false", "enabled": "true", "group-rebalance": "false",
                   "group-buckets": "-1", "non-destructive": "false", "consumers-before-dispatch": "0",
                   "delay-before-dispatch": "-1", "ring-size": "-1", "last-value": "false",
                   "group-rebalance-pause-dispatch": "false", "auto-delete": "false",
                   "internal": "false"}


def convert(root: Node, path: Path, notes: Notes) -> dict:
    if root.tag != "configuration":
        hint = "; is it an ActiveMQ Classic file? try: hermod import activemq" if root.tag in ("beans", "broker") else ""
        raise ImportFailed(f"{path}: root element <{root.tag}> is not an Artemis <configuration>{hint}")
    core = root.child("core")
    if core is None:
        raise ImportFailed(f"{path}: <configuration> has no <core> element")
    for other in root.children:
        if other is not core:
            notes.skip(other, _GENERIC)
    conv = _Artemis(path, notes)
    conv.run(core)
    return conv.doc


class _Artemis:
    def __init__(self, path: Path, notes: Notes):
        self.path = path
        self.notes = notes
        self.values = Placeholders({}, notes)
        self.doc: dict = {}

    def text(self, node: Node, fallback: str | None = None) -> str | None:
        return self.values.resolve(node.text.strip(), node.line, fallback)

    def run(self, core: Node) -> None:
        security_enabled = True
        handlers = {"acceptors": self.acceptors, "addresses": self.addresses,
                    "address-settings": self.address_settings, "diverts": self.diverts}
        security = None
        for el in core.children:
            if el.tag in handlers:
                handlers[el.tag](el)
            elif el.tag == "security-settings":
                security = el
            elif el.tag == "security-enabled" and boolean(el.text) is not None:
                security_enabled = boolean(el.text)
            elif el.tag == "persistence-enabled" and boolean(el.text) is False:
                self.doc.setdefault("store", {})["url"] = "memory"
            elif el.tag == "persistence-enabled" and boolean(el.text):
                pass  # the default: a durable store
            elif el.tag == "name":
                pass  # the broker's name only labels it in Artemis's own tools
            else:
                self.notes.skip(el, _WHY.get(el.tag, _GENERIC))
        self.security(security, security_enabled, core.line)

    # -- acceptors ---------------------------------------------------------------------------

    def acceptors(self, el: Node) -> None:
        for acc in el.children:
            if acc.tag != "acceptor":
                self.notes.skip(acc, _GENERIC)
                continue
            uri = self.text(acc)
            if uri is None:
                self.notes.skip(acc, "its URI has a placeholder with no value")
                continue
            self.acceptor(acc, uri)

    def acceptor(self, acc: Node, uri: str) -> None:
        m = re.match(r"^(\w+)://(\[[^\]]*\]|[^:/?]*)(?::(\d+))?/?(?:\?(.*))?$", uri.strip())
        if not m or m.group(1) != "tcp":
            self.notes.skip(acc, f"not a tcp:// acceptor ({uri})")
            return
        host, port = m.group(2).strip("[]") or "0.0.0.0", int(m.group(3) or 61616)
        params = dict(p.split("=", 1) if "=" in p else (p, "") for p in re.split(r"[;&]", m.group(4) or "") if p)
        # Artemis's acceptor speaks every protocol it has unless `protocols` narrows it.
        named = [p.strip().upper() for p in params.get("protocols", "CORE,AMQP,STOMP,HORNETQ,MQTT,OPENWIRE").split(",")
                 if p.strip()]
        protocols = [p for p in ALL_PROTOCOLS if p.upper() in named]
        unserved = [p for p in named if p.lower() not in ALL_PROTOCOLS]
        if not protocols:
            self.notes.skip(acc, f"speaks {','.join(named)}: Hermod speaks AMQP, OpenWire, STOMP and MQTT "
                                 "(not Artemis's Core protocol)")
            return
        listener: dict = {"host": host, "port": port}
        if protocols != ALL_PROTOCOLS:
            listener["protocols"] = protocols
        dropped = []
        if boolean(params.get("sslEnabled", "false")):
            listener["tls"] = True
            self.tls(acc, params)
        for key, hermod in (("anycastPrefix", "anycast_prefix"), ("multicastPrefix", "multicast_prefix")):
            if key in params:
                if "server" not in self.doc and "amqp" in protocols:
                    listener[hermod] = params[key]
                else:
                    dropped.append(key)
        if "server" not in self.doc and "amqp" in protocols:  # [server]'s readiness line is amqp://
            listener["#"] = [f"acceptor {acc.attrib.get('name', '')!r} ({self.path.name} line {acc.line})"]
            self.doc["server"] = listener
        else:
            listener = {"name": listener_name(acc.attrib.get("name", ""), self.doc), **listener}
            self.doc.setdefault("listener", []).append(listener)
        why = []
        if unserved and "protocols" in params:
            why.append(f"without {','.join(unserved)} (Hermod does not speak Artemis's Core protocol; its "
                       "clients can use AMQP or OpenWire)")
        if dropped:
            why.append(f"{', '.join(dropped)} only apply to Hermod's [server]")
        if why:
            self.notes.note(acc, "imported, but " + "; ".join(why))

    def tls(self, acc: Node, params: dict) -> None:
        tls = self.doc.setdefault("tls", {"cert": "server.crt", "key": "server.key"})
        if boolean(params.get("needClientAuth", "false")):
            tls["client_certificates"] = "required"
        elif boolean(params.get("wantClientAuth", "false")) and "client_certificates" not in tls:
            tls["client_certificates"] = "optional"
        if "client_certificates" in tls:
            tls["ca"] = "ca.crt"
        self.notes.note(acc, f"its key store ({params.get('keyStorePath', 'unnamed')}) is Java's; imported with "
                             f"TLS on, reading PEM files server.crt, server.key{', ca.crt' if 'ca' in tls else ''} "
                             f"beside the config (export them from the key store)")

    # -- addresses ---------------------------------------------------------------------------

    def addresses(self, el: Node) -> None:
        for a in el.children:
            if a.tag != "address" or "name" not in a.attrib:
                self.notes.skip(a, "not an <address name=...>")
                continue
            entry: dict = {"name": a.attrib["name"], "routing": []}
            queues = []
            for kind in a.children:
                if kind.tag not in ("anycast", "multicast"):
                    self.notes.skip(kind, _GENERIC)
                    continue
                if kind.tag not in entry["routing"]:
                    entry["routing"].append(kind.tag)
                for q in kind.children:
                    queue = self.queue(q, kind.tag)
                    if queue is not None:
                        queues.append(queue)
            if not entry["routing"]:
                self.notes.note(a, "has no routing type; imported as anycast (Hermod's default)")
                del entry["routing"]
            if queues:
                entry["queue"] = queues
            self.doc.setdefault("address", []).append(entry)

    def queue(self, q: Node, routing: str) -> dict | None:
        if q.tag != "queue" or "name" not in q.attrib:
            self.notes.skip(q, "not a <queue name=...>")
            return None
        out: dict = {"name": q.attrib["name"], "routing": routing}
        dropped = []
        for key, value in q.attrib.items():
            if key == "name":
                continue
            if key == "max-consumers" and integer(value) is not None:
                out["max_consumers"] = integer(value)
            elif key == "exclusive" and boolean(value) is not None:
                out["exclusive"] = boolean(value)
            elif key == "last-value-key":
                out["last_value_key"] = value
            elif key == "last-value" and boolean(value):
                out.setdefault("last_value_key", "_AMQ_LVQ_NAME")  # Artemis's default key
            elif _QUEUE_DEFAULTS.get(key) != value:
                dropped.append(f"{key}={value}")
        for child in q.children:
            if child.tag == "durable" and boolean(child.text) is not None:
                out["durable"] = boolean(child.text)
            elif child.tag == "filter" and child.attrib.get("string", "").strip():
                selector = child.attrib["string"].strip()
                error = check_selector(selector)
                if error:
                    self.notes.skip(q, f"its filter does not parse as a selector here ({error})")
                    return None
                out["filter"] = selector
            elif child.tag in ("filter",):
                pass
            else:
                dropped.append(f"<{child.tag}>")
        if dropped:
            self.notes.note(q, f"imported without {', '.join(dropped)} ({_GENERIC})")
        return out

    # -- address settings --------------------------------------------------------------------

    def address_settings(self, el: Node) -> None:
        for s in el.children:
            if s.tag != "address-setting" or "match" not in s.attrib:
                self.notes.skip(s, "not an <address-setting match=...>")
                continue
            entry: dict = {"match": s.attrib["match"]}
            for child in s.children:
                mapped = _SETTINGS.get(child.tag)
                raw = self.text(child) if mapped else None
                value = mapped[1](raw) if mapped and raw is not None else None
                if value is None:
                    self.notes.skip(child, f"in <address-setting match=\"{entry['match']}\">: "
                                           + (f"value {child.text.strip()!r} not understood" if mapped else _GENERIC))
                    continue
                entry[mapped[0]] = value
            if len(entry) > 1:
                self.doc.setdefault("address_settings", []).append(entry)

    # -- diverts -----------------------------------------------------------------------------

    def diverts(self, el: Node) -> None:
        routing_names: dict[str, str] = {}
        for d in el.children:
            if d.tag != "divert" or "name" not in d.attrib:
                self.notes.skip(d, "not a <divert name=...>")
                continue
            out: dict = {"name": d.attrib["name"]}
            problems = []
            for child in d.children:
                tag, text = child.tag, child.text.strip()
                if tag == "address":
                    out["address"] = text
                elif tag == "forwarding-address":
                    out["forwarding_address"] = ",".join(split_list(text))
                elif tag == "exclusive" and boolean(text) is not None:
                    out["exclusive"] = boolean(text)
                elif tag == "routing-type" and text.lower() in ("anycast", "multicast", "pass", "strip"):
                    out["routing_type"] = text.lower()
                elif tag == "filter":
                    out["filter"] = child.attrib.get("string", "").strip()
                elif tag in ("transformer-class-name", "transformer"):
                    name = text or (child.child_text("class-name") or "")
                    problems.append(f"its transformer {name} is a Java class (Hermod's is a Python "
                                    f"callable, [[divert]] transformer); imported without it")
                elif tag == "routing-name":
                    other = routing_names.get(text)
                    if other is not None:
                        problems.append(f"shares routing-name {text!r} with divert {other!r}: Hermod "
                                        f"fires both instead of taking turns")
                    routing_names.setdefault(text, out["name"])
                else:
                    problems.append(f"<{tag}> is not understood")
            if "address" not in out or not out.get("forwarding_address"):
                self.notes.skip(d, "needs <address> and <forwarding-address>")
                continue
            if out.get("filter"):
                error = check_selector(out["filter"])
                if error:
                    self.notes.skip(d, f"its filter does not parse as a selector here ({error})")
                    continue
            elif "filter" in out:
                del out["filter"]
            if problems:
                self.notes.note(d, "; ".join(problems))
            self.doc.setdefault("divert", []).append(out)

    # -- security ----------------------------------------------------------------------------

    def security(self, settings: Node | None, enabled: bool, core_line: int) -> None:
        """Users, the guest login and permissions. An import never grants more than Artemis did:
        with security on and no `<security-setting>` Artemis lets a logged-in user do nothing,
        while Hermod with no `[[security.permission]]` lets everyone do everything, so that case
        becomes one entry on `#` that grants no role (and one line saying so)."""
        users, guest_role = self.users()
        section: dict = {}
        if guest_role is not None:
            section["anonymous"] = True
        elif users:
            section["anonymous"] = False
        if users:
            section["user"] = users
        if not enabled:
            if settings is not None:
                self.notes.skip(settings, "security-enabled is false (with no permissions Hermod lets every "
                                          "user do everything, as Artemis did)")
        else:
            permissions = self.permissions(settings, guest_role) if settings is not None else []
            if permissions:
                section["permission"] = permissions
                if not users and guest_role is None:
                    self.notes.say(settings.line if settings is not None else core_line,
                                   "no artemis-users.properties or login.config beside the file: the "
                                   "permissions name roles no Hermod user has yet (hermod user add)")
            else:
                section["permission"] = [NOTHING_ALLOWED]
                where = "an empty <security-settings>" if settings is not None else "no <security-settings>"
                self.notes.say(settings.line if settings is not None else core_line,
                               f"{where}: Artemis allows nothing to logged-in users, so the imported "
                               f"configuration allows nothing until permissions are written "
                               f"([[security.permission]])")
        if section:
            self.doc["security"] = section

    def permissions(self, el: Node, guest_role: str | None) -> list[dict]:
        out = []
        for s in el.children:
            if s.tag != "security-setting" or "match" not in s.attrib:
                self.notes.skip(s, _WHY.get(s.tag, "not a <security-setting match=...>"))
                continue
            entry: dict = {"match": s.attrib["match"]}
            for p in s.children:
                kind = p.attrib.get("type", "")
                roles = split_list(p.attrib.get("roles", ""))
                if p.tag != "permission" or kind not in _PERMISSIONS:
                    self.notes.skip(p, f"in <security-setting match=\"{entry['match']}\">: "
                                       + _PERMISSION_WHY.get(kind, _GENERIC))
                    continue
                if guest_role in roles:
                    roles.append("anonymous")  # Hermod's anonymous login has the role `anonymous`
                key = _PERMISSIONS[kind]
                entry[key] = sorted(set(entry.get(key, [])) | set(roles))
            out.append(entry)
        return out

    def users(self) -> tuple[list[dict], str | None]:
        """Users and roles from the properties files beside broker.xml; the guest role when
        login.config lets guests in."""
        here = self.path.parent
        guest_role = None
        login = here / "login.config"
        if login.is_file():
            text = login.read_text(errors="replace")
            if "GuestLoginModule" in text:
                m = re.search(r"org\.apache\.activemq\.jaas\.guest\.role\s*=\s*\"?([^\"\s;]+)", text)
                guest_role = m.group(1) if m else "guests"
        users_file, roles_file = here / "artemis-users.properties", here / "artemis-roles.properties"
        if not users_file.is_file():
            return [], guest_role
        passwords = read_properties(users_file)
        roles_of: dict[str, list[str]] = {}
        if roles_file.is_file():
            for role, members in read_properties(roles_file).items():
                for user in split_list(members):
                    roles_of.setdefault(user, []).append(role)
        note = lambda text: self.notes.lines.append(f"{users_file}: {text}")  # noqa: E731
        return [user_entry(name, pw, roles_of.get(name, []), note)
                for name, pw in passwords.items()], guest_role
