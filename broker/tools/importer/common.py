"""Helpers both importers use."""
from __future__ import annotations

from ...selector import SelectorError, compile_selector

# Hermod's protocols in the order its config lists them (a listener with all four omits `protocols`).
ALL_PROTOCOLS = ["amqp", "openwire", "stomp", "mqtt"]


def check_selector(text: str) -> str | None:
    """None when Hermod's selector engine accepts `text`, else the parse error."""
    try:
        compile_selector(text)
    except SelectorError as e:
        return str(e)
    return None


def split_list(text: str) -> list[str]:
    """`a, b,,c` -> [a, b, c]: roles, forwarding addresses, groups."""
    return [p.strip() for p in text.split(",") if p.strip()]


def listener_name(wanted: str, doc: dict) -> str:
    """A unique `[[listener]]` name (\"main\" is [server]'s)."""
    taken = {l["name"] for l in doc.get("listener", [])} | {"main"}
    base = wanted or "listener"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name
