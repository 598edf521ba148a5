"""MQTT topic names and filters as pure functions: validation, shared subscriptions, the
mapping to Hermod addresses, and the `$` rule.

Mapping (contract, "Names"): levels are joined by `.` instead of `/`, a `+` level is `*` and a
`#` level is `#`: `sport/tennis/+` is the address pattern `sport.tennis.*`. A level may hold
characters that mean something in an address, so they are percent-escaped inside a level:

- `.` (the word separator) is always `%2E`;
- a level that is exactly `*` or `>` (address wildcards) is `%2A` or `%3E`; inside a longer
  level they are literal in addresses too (`a*b`), and stay as they are;
- the second `:` of `::` (the FQQN separator) is `%3A`;
- a `%` followed by two hex digits is `%25`, so that it decodes back to itself; any other `%`
  stays as it is.

Topics without these characters (nearly all) map unchanged apart from `/` -> `.`, so an AMQP
consumer of `plant.line1.temp` sees MQTT's `plant/line1/temp` with nothing to decode. The
mapping is reversible: `address_to_topic(topic_to_address(t)) == t` for every topic name, and
`topic_to_address(address_to_topic(a)) == a` for every address an MQTT client could reach plus
any address without `%`, `/`, `+` or `#` (a reply-to `replies.d1` is the response topic
`replies/d1`). `address_to_topic` escapes a `+` or `#` inside a word (`%2B`, `%23`) so that the
result is a valid topic name; a wildcard word has no topic name (0x90).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .errors import TOPIC_FILTER_INVALID, TOPIC_NAME_INVALID, MqttError

SHARE_PREFIX = "$share/"
_MAX_BYTES = 65535
_HEX_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_NEEDS_ESCAPE = re.compile(r"[.:%*>]")


class SharedSubscription(NamedTuple):
    group: str  # the shared queue's name on the address
    filter: str  # the topic filter inside `$share/GROUP/FILTER`


def _check_common(text: str, code: int, what: str) -> None:
    if not text:
        raise MqttError(code, f"empty {what}")
    if "\x00" in text:
        raise MqttError(code, f"{what} contains U+0000")
    if len(text) * 3 > _MAX_BYTES and len(text.encode("utf-8", "surrogatepass")) > _MAX_BYTES:
        raise MqttError(code, f"{what} longer than 65,535 bytes")


def validate_topic_name(name: str) -> None:
    """A topic name a PUBLISH may carry: not empty, no wildcard characters (0x90 otherwise)."""
    _check_common(name, TOPIC_NAME_INVALID, "topic name")
    if "+" in name or "#" in name:
        raise MqttError(TOPIC_NAME_INVALID, f"wildcard in topic name {name!r}")


def validate_topic_filter(topic_filter: str) -> None:
    """A topic filter (shared or not): `+` only as a whole level, `#` only as the whole last
    level (0x8F otherwise)."""
    _check_common(topic_filter, TOPIC_FILTER_INVALID, "topic filter")
    shared = parse_shared(topic_filter)
    if shared is not None:
        topic_filter = shared.filter
    if "+" not in topic_filter and "#" not in topic_filter:
        return
    levels = topic_filter.split("/")
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if level == "+" or (level == "#" and i == last):
            continue
        if "+" in level or "#" in level:
            raise MqttError(TOPIC_FILTER_INVALID, f"misplaced wildcard in topic filter {topic_filter!r}")


def parse_shared(topic_filter: str) -> SharedSubscription | None:
    """`$share/GROUP/FILTER` -> (GROUP, FILTER); any other filter -> None. A group that is empty
    or holds `+` or `#`, or a missing filter, is 0x8F."""
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    group, sep, rest = topic_filter[len(SHARE_PREFIX):].partition("/")
    if not group or "+" in group or "#" in group or not sep or not rest:
        raise MqttError(TOPIC_FILTER_INVALID, f"invalid shared subscription {topic_filter!r}")
    return SharedSubscription(group, rest)


def _escape_level(level: str) -> str:
    if level == "*":
        return "%2A"
    if level == ">":
        return "%3E"
    if not _NEEDS_ESCAPE.search(level):
        return level
    level = _HEX_ESCAPE.sub(r"%25\1", level).replace(".", "%2E")
    while "::" in level:
        level = level.replace("::", ":%3A", 1)
    return level


def _unescape_word(word: str) -> str:
    if "%" not in word:
        return word
    return _HEX_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), word)


def topic_to_address(topic: str) -> str:
    """The Hermod address of an MQTT topic name (`plant/line1/temp` -> `plant.line1.temp`)."""
    if not _NEEDS_ESCAPE.search(topic):
        return topic.replace("/", ".")
    return ".".join(_escape_level(level) for level in topic.split("/"))


def filter_to_pattern(topic_filter: str) -> str:
    """The Hermod address pattern of an MQTT topic filter (not shared: see parse_shared):
    `sport/tennis/+` -> `sport.tennis.*`, `sport/#` -> `sport.#`."""
    return ".".join("*" if level == "+" else "#" if level == "#" else _escape_level(level)
                    for level in topic_filter.split("/"))


def address_to_topic(address: str) -> str:
    """The MQTT topic name for a Hermod address (a message's address, a reply-to): the inverse
    of topic_to_address. A wildcard word has no topic name (0x90)."""
    words = address.split(".")
    out = []
    for word in words:
        if word in ("*", "#", ">"):
            raise MqttError(TOPIC_NAME_INVALID, f"address {address!r} is a wildcard pattern")
        word = _unescape_word(word)
        if "+" in word or "#" in word:
            word = word.replace("+", "%2B").replace("#", "%23")
        out.append(word)
    return "/".join(out)


def topic_matches(topic_filter: str, topic: str) -> bool:
    """MQTT matching of a topic name against a (non-shared) filter, with the `$` rule: a filter
    starting with a wildcard never matches a name starting with `$` ([MQTT-4.7.2-1])."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    f_levels = topic_filter.split("/")
    t_levels = topic.split("/")
    for i, f in enumerate(f_levels):
        if f == "#":
            return True
        if i >= len(t_levels):
            return False
        if f != "+" and f != t_levels[i]:
            return False
    return len(f_levels) == len(t_levels)


def dollar_excluded(pattern: str, address: str) -> bool:
    """The `$` rule in address terms, for the core's matching: True when an MQTT subscription's
    address pattern starts with a wildcard word and the address starts with `$`, so the match
    must be refused although the pattern matches."""
    if not address.startswith("$"):
        return False
    first = pattern.split(".", 1)[0]
    return first in ("*", "#", ">")
