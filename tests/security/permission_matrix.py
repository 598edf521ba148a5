"""The permission matrix, from the contract ("Security", "HTTP", "AMQP names a client uses"):
every operation x every entry path, each cell tried by a user whose role may and one whose role
may not, the answer read over the wire.

The table is the list of registered entry paths (`PATHS`); each says which of the operations
`send`, `consume`, `browse`, `create_address`, `create_durable_queue`, `delete_queue`, `manage`
it exercises. A cell is (operation, path) and owns the address prefix `pm.cNNN` (its entries
cannot touch another cell's); `config()` writes one broker config from the cells: the users
(`admin`, `may`, `maynot`, `nobody`), each cell's `[[security.permission]]` entries (the
admin everywhere, `#` included), and the addresses the cells act on.

A new way in (the OpenWire, STOMP and MQTT adapters) joins by appending its `EntryPath`
subclasses here: e.g. an OpenWire producer path with `protocol = "openwire"`, `operations =
("send", "create_address")`, `denials = ("JMSSecurityException",)` and an `attempt` that sends
with the ActiveMQ client as `case.user` to `case.address` and reports `allowed(...)` with the
message seen by `wire.take`, or `denied("JMSSecurityException", ...)`. Its cells, config and
cases follow from the table; a path that skips the decision point fails its denied cases."""
from __future__ import annotations

from matrix_amqp import PATHS as AMQP_PATHS
from matrix_core import ALL, MANAGEMENT, RIGHTS, Case, EntryPath, users_toml
from matrix_management import PATHS as MANAGEMENT_PATHS
from matrix_mqtt import PATHS as MQTT_PATHS
from matrix_openwire import PATHS as OPENWIRE_PATHS
from matrix_stomp import PATHS as STOMP_PATHS

PATHS: list[EntryPath] = [*AMQP_PATHS, *MANAGEMENT_PATHS, *OPENWIRE_PATHS, *STOMP_PATHS, *MQTT_PATHS]


def cells() -> list[tuple[int, str, EntryPath]]:
    """(index, operation, path) for every cell, in table order."""
    out, index = [], 0
    for path in PATHS:
        for operation in path.operations:
            assert operation in RIGHTS, (path.name, operation)
            out.append((index, operation, path))
            index += 1
    return out


def cases() -> list[Case]:
    """Every cell twice: its allowed user (expects "allowed"), its denied user ("denied")."""
    out = []
    for index, operation, path in cells():
        yes, no = path.users(operation)
        out.append(Case(operation, path, index, yes, "allowed"))
        out.append(Case(operation, path, index, no, "denied"))
    return out


def _entry(match: str, grants: dict[str, frozenset[str]]) -> str:
    grants = {**grants, "admin": ALL}
    lines = [f'[[security.permission]]\nmatch = "{match}"']
    for right in RIGHTS:
        roles = sorted(user for user, rights in grants.items() if right in rights)
        lines.append(f"{right} = [{', '.join(f'{r!r}' for r in roles)}]".replace("'", '"'))
    return "\n".join(lines) + "\n"


def config() -> str:
    parts = ["[security]\nanonymous = false\n", users_toml(),
             _entry("#", {}),
             # Reaching the management endpoint: a request is then checked per address (the
             # contract); `send` here, not `manage`, which would make a user the broker's admin.
             _entry(MANAGEMENT, {"may": frozenset({"send"}), "maynot": frozenset({"send"})}),
             # Classic clients watch the temporary-destination advisories on connect; secured
             # Classic configs grant them (contract: advisory topics are addresses like any other).
             _entry("ActiveMQ.Advisory.#", {u: frozenset({"consume", "create_address"}) for u in ("may", "maynot")})]
    seen: set[str] = set()
    for index, operation, path in cells():
        for match, grants in path.entries(operation, index):
            assert match not in seen, f"two cells share the entry {match}"
            seen.add(match)
            parts.append(_entry(match, grants))
    for case in cases():
        parts.append(case.path.toml(case))
    return "\n".join(parts)


__all__ = ["PATHS", "cases", "cells", "config"]
