"""ActiveMQ Classic's authorization entries as Hermod permissions that grant no more than Classic did.

The two brokers decide differently. Classic grants a right on a destination to the union of
the roles of *every* `authorizationEntry` whose pattern matches it, and keeps queue and topic
entries apart. Hermod's most specific `[[security.permission]]` match decides alone, and one
entry covers an address whatever its routing type. Copied one for one, a narrow entry would take
away what a wide one granted (`admins` on `>` refused on `ORDERS.IN`), and a queue entry merged
with a topic entry would hand one kind's roles to the other.

So each Hermod entry for a pattern P carries, per right, the union of the roles of every Classic
entry of the same kind whose pattern covers P (matches every name P matches). Whatever Hermod
entry decides for an address, all the Classic entries it draws from match that address too:
Hermod never grants more than Classic. Where P has both a queue and a topic entry, only the roles
both kinds grant are kept (the wider choice would give one kind's roles to the other), and the
dropped roles are named on stderr. Where two patterns overlap without one covering the other,
Hermod applies only one of them to the names both match; that is narrower than Classic and is
named on stderr too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

# Classic right -> Hermod operations. `admin` is Classic's right to create (and a client's right
# to destroy) destinations; Classic's management (JMX, web console) has its own roles, so no
# Hermod `manage` comes from it.
RIGHTS = {"read": ("consume", "browse"), "write": ("send",),
          "admin": ("create_address", "create_durable_queue", "delete_queue")}
OPERATIONS = tuple(op for ops in RIGHTS.values() for op in ops)


@dataclass
class ClassicEntry:
    kind: str  # "queue" | "topic"
    match: str  # in Hermod's wildcards (`#`, not `>`)
    label: str  # for notes: `queue="ORDERS.>"`
    line: int
    roles: dict[str, frozenset[str]] = field(default_factory=dict)  # Hermod operation -> roles


def _words(pattern: str) -> tuple[str, ...]:
    return tuple("#" if w in ("#", ">") else w for w in pattern.split("."))


@lru_cache(maxsize=4096)
def _covers(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    if not wide:
        return not narrow
    head, rest = wide[0], wide[1:]
    if head == "#":  # absorbs any number of the narrow pattern's words, `*` and `#` included
        return any(_covers(rest, narrow[i:]) for i in range(len(narrow) + 1))
    if not narrow or narrow[0] == "#":
        return False  # a literal or `*` cannot stand for none or many words
    if head == "*" or head == narrow[0]:
        return _covers(rest, narrow[1:])
    return False


def covers(wide: str, narrow: str) -> bool:
    """Every name `narrow` matches, `wide` matches too."""
    return _covers(_words(wide), _words(narrow))


@lru_cache(maxsize=4096)
def _overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return all(w == "#" for w in a + b)
    if a[0] == "#":
        return _overlap(a[1:], b) or _overlap(a, b[1:])
    if b[0] == "#":
        return _overlap(a, b[1:]) or _overlap(a[1:], b)
    if a[0] == "*" or b[0] == "*" or a[0] == b[0]:
        return _overlap(a[1:], b[1:])
    return False


def overlap(a: str, b: str) -> bool:
    """Some name matches both patterns."""
    return _overlap(_words(a), _words(b))


def _granted(entries: list[ClassicEntry], kind: str, match: str, op: str) -> frozenset[str]:
    """Classic's grant of `op` on every name of `match`: the union over the entries of `kind`
    that cover it."""
    out: set[str] = set()
    for e in entries:
        if e.kind == kind and covers(e.match, match):
            out |= e.roles.get(op, frozenset())
    return frozenset(out)


def permissions(entries: list[ClassicEntry]) -> tuple[list[dict], list[tuple[ClassicEntry, str]]]:
    """The Hermod permission entries (file order of first appearance) and the notes:
    (entry the note is about, text)."""
    notes: list[tuple[ClassicEntry, str]] = []
    by_match: dict[str, list[ClassicEntry]] = {}
    for e in entries:
        by_match.setdefault(e.match, []).append(e)
    out: list[dict] = []
    for match, own in by_match.items():
        kinds = sorted({e.kind for e in own})
        entry: dict = {"match": match}
        dropped: list[str] = []
        for op in OPERATIONS:
            grants = {kind: _granted(entries, kind, match, op) for kind in kinds}
            kept = frozenset.intersection(*grants.values())
            for kind in kinds:
                lost = grants[kind] - kept
                if lost:
                    dropped.append(f"{op} for {', '.join(sorted(lost))} ({kind})")
            if kept:
                entry[op] = sorted(kept)
        if dropped:
            notes.append((own[-1], f"Hermod does not tell queues from topics: on {match} only the roles both "
                                   f"the queue and the topic entries grant are kept; dropped: {'; '.join(dropped)}"))
        out.append(entry)
    notes += _overlaps(out, by_match)
    return out, notes


def _overlaps(out: list[dict], by_match: dict[str, list[ClassicEntry]]) -> list[tuple[ClassicEntry, str]]:
    """Two patterns that overlap without either covering the other: on the names both match,
    Hermod applies one entry where Classic took the union of both (one line per such pair whose
    grants differ)."""
    notes = []
    for i, a in enumerate(out):
        for b in out[i + 1:]:
            p, q = a["match"], b["match"]
            if covers(p, q) or covers(q, p) or not overlap(p, q):
                continue
            if all(set(a.get(op, ())) == set(b.get(op, ())) for op in OPERATIONS):
                continue
            notes.append((by_match[q][0], f"overlaps the entry for {p} without either covering the other: "
                                          f"where a name matches both, Hermod applies only the more specific "
                                          f"one, so it grants less there than Classic did (write an entry for "
                                          f"those names if they need both)"))
    return notes
