"""The small edits the broker makes to a message's encoded bytes on the way out and for copies:
the delivery count, added or merged message annotations, a divert or dead-letter copy's new head
(header + annotations) in front of the original's shared bare message. Everything else stays
byte for byte. Split from `codec.py` (which reads the sections) to keep each module small.
"""
from __future__ import annotations

import struct
from typing import Any

from .codec import (DecodeError, Envelope, Symbol, _bounded_value, _Budget, _u32, encode, encode_header,
                    skip)


def with_delivery_count(buf: bytes, env: Envelope, delivery_count: int) -> bytes:
    """The message as it goes out on a redelivery: same bytes with header.delivery-count set."""
    header = encode_header(env.durable, env.priority, env.ttl, env.first_acquirer, delivery_count)
    return header + buf[env.header_end:]


def with_annotations(buf: bytes, env: Envelope, extra: dict, drop: tuple[str, ...] = (),
                     clear_expiry: bool = False) -> bytes:
    """The message with `extra` message annotations set (replacing same-named ones) and the keys
    in `drop` removed. Untouched annotations keep their exact encoding (a byte stays a byte);
    everything else stays byte for byte; delivery annotations are dropped. `clear_expiry`
    removes header.ttl and properties.absolute-expiry-time (dead-letter and expiry copies
    never expire)."""
    return annotated_copy(buf, env, extra, drop, clear_expiry)[0]


def annotated_copy(buf: bytes, env: Envelope, extra: dict, drop: tuple[str, ...] = (),
                   clear_expiry: bool = False) -> tuple[bytes, Envelope]:
    """`with_annotations`, and the copy's envelope (derived, not parsed again)."""
    if clear_expiry and (env.ttl or env.properties_count > 8):
        return _expiry_cleared_copy(buf, env, extra, drop)
    head, envelope = annotated_head(buf, env, extra, drop)
    return head + buf[env.bare_at:], envelope


def annotated_head(front: bytes, env: Envelope, extra: dict, drop: tuple[str, ...] = ()) -> tuple[bytes, Envelope]:
    """What comes before the bare message in a copy with `extra` message annotations set
    (replacing same-named ones) and `drop` removed: the header as it was and the new
    annotations section (delivery annotations are dropped), and the envelope of the copy
    whose bare message follows that head. `front` holds the original at least up to its
    bare message (`env` reads it)."""
    header, entries, annotations = _copy_entries(front, env, extra, drop)
    if not entries:
        return header, env.shifted(len(header), annotations or None, -1, len(header))
    body = b"".join(entries)
    count = len(entries) * 2
    if len(body) + 1 < 256 and count < 256:
        head = b"".join((header, b"\x00\x53\x72\xc1", bytes((len(body) + 1, count)), body))
    else:
        head = header + _annotations_section(entries)
    return head, env.shifted(len(header), annotations, len(header), len(head))


def _copy_entries(front: bytes, env: Envelope, extra: dict, drop: tuple[str, ...]) -> tuple[bytes, list[bytes], dict]:
    """A copy's header, its encoded annotation entries (the original's kept ones, then `extra`'s
    in order) and its annotations (`annotated_head`)."""
    header = front[:env.header_end]
    original = env.annotations
    if env.annotations_at >= 0 and (original is None or any(k not in extra and k not in drop for k in original)):
        entries = [raw for key, raw in _raw_annotation_entries(front, env) if key not in extra and key not in drop]
    else:  # nothing of the original's kept (none, or all replaced or dropped): no need to read them
        entries = []
    annotations = {k: v for k, v in original.items() if k not in extra and k not in drop} if original else {}
    # One pass over `extra` for both the encoded entries and the copy's annotations, the
    # caches read inline, the head joined once (a divert copy makes this call for every
    # copy): 1.72 -> 1.31 µs for a divert's three x-opt-ORIG-* annotations (timeit).
    cached, symbols = _ENTRIES, _SYMBOL_KEYS
    for k, v in extra.items():
        entry = cached.get((k, v)) if type(v) is str else None
        entries.append(entry if entry is not None else _encoded_entry(k, v))
        annotations[symbols.get(k) or _symbol_key(k)] = v
    return header, entries, annotations


class CopyHeads:
    """The heads (`annotated_head`) of copies of one original that differ only in the value of
    one annotation, `key`: the divert copies of one send, whose `x-opt-ORIG-QUEUE` names each
    divert. The header and every other entry are encoded once; a copy's head is those bytes
    with its own entry spliced in, the very bytes `annotated_head` writes.

    Made for one send's routing and dropped with it (`RoutingContext`), so it holds one
    original's head for the length of a send, whatever the original carries."""

    __slots__ = ("_header", "_lead", "_before", "_after", "_fixed", "_count", "_annotations", "_key", "_symbol",
                 "_same", "_bare_at", "_properties_at", "_app_properties_at", "__weakref__")

    def __init__(self, front: bytes, env: Envelope, extra: dict, key: str, drop: tuple[str, ...] = ()):
        header, entries, annotations = _copy_entries(front, env, extra, drop)
        at = len(entries) - len(extra) + list(extra).index(key)
        self._header = header
        self._lead = b"".join((header, b"\x00\x53\x72\xc1"))  # `front` may be any bytes-like
        self._before = b"".join(entries[:at])
        self._after = b"".join(entries[at + 1:])
        self._fixed = len(self._before) + len(self._after) + 1  # + the map's count byte
        self._count = len(entries) * 2
        self._annotations = annotations  # the key's place kept: the copy's order is annotated_head's
        self._key = key
        self._symbol = _SYMBOL_KEYS.get(key) or _symbol_key(key)
        at = len(header)
        self._same = (env.durable, env.priority, env.ttl, env.first_acquirer, at, at, env.properties_count)
        self._bare_at, self._properties_at, self._app_properties_at = env.bare_at, env.properties_at, env.app_properties_at

    def head(self, value: str) -> tuple[bytes, Envelope]:
        """The head and envelope of the copy whose `key` annotation is `value` (a string)."""
        key = self._key
        entry = _ENTRIES.get((key, value)) or _encoded_entry(key, value)
        size = self._fixed + len(entry)
        count = self._count
        if size < 256 and count < 256:  # the lead: the header and the section's descriptor
            head = b"".join((self._lead, _SIZE_COUNT8(size, count), self._before, entry, self._after))
        else:
            head = b"".join((self._header, b"\x00\x53\x72\xd1", struct.pack(">II", size + 3, count), self._before,
                             entry, self._after))
        # The copy's envelope (`Envelope.shifted`, inline): only where the bare message starts
        # differs between copies, by the length of their entry; its annotations are made when
        # read (`_CopyEnvelope`).
        env = _new_envelope(_CopyEnvelope)
        (env.durable, env.priority, env.ttl, env.first_acquirer, env.header_end, env.annotations_at,
         env.properties_count) = self._same
        env._shared = self._annotations
        env._key = self._symbol
        env._value = value
        env.bare_at = bare_at = len(head)
        delta = bare_at - self._bare_at
        env.properties_at = self._properties_at + delta if self._properties_at >= 0 else -1
        env.app_properties_at = self._app_properties_at + delta if self._app_properties_at >= 0 else -1
        return head, env


class _CopyEnvelope(Envelope):
    """The envelope of a `CopyHeads` copy: its annotations dict (the copies' shared one with
    the copy's own value of the key) is made on first read, which few copies see (selectors on
    annotations, management, a copy of the copy): 0.51 -> 0.43 µs a head (timeit), and no dict
    per waiting copy: 3.71 -> 3.59 µs a copy in process, 5.23 -> 4.30 µs live with 300k copies
    queued (`divert_copies.py --only copy|fill`, 5 interleaved, load 1.4-3). Read and set as
    any envelope's."""

    __slots__ = ("_shared", "_key", "_value")

    @property
    def annotations(self) -> dict | None:
        try:
            return _ANNOTATIONS_SLOT.__get__(self, Envelope)
        except AttributeError:  # not read yet
            annotations = self._shared.copy()
            annotations[self._key] = self._value
            _ANNOTATIONS_SLOT.__set__(self, annotations)
            return annotations

    @annotations.setter
    def annotations(self, value: dict | None) -> None:
        _ANNOTATIONS_SLOT.__set__(self, value)


_ANNOTATIONS_SLOT = Envelope.__dict__["annotations"]  # the slot `_CopyEnvelope.annotations` keeps
_new_envelope = Envelope.__new__
_SIZE_COUNT8 = struct.Struct("BB").pack  # a map8's size and count: 90 -> 49 ns (timeit)


def _expiry_cleared_copy(buf: bytes, env: Envelope, extra: dict, drop: tuple[str, ...]) -> tuple[bytes, Envelope]:
    """A dead-letter or expiry copy of a message with a ttl or an absolute expiry time: both
    are taken out (such copies never expire), and the copy is parsed again."""
    header = encode_header(env.durable, env.priority, 0, env.first_acquirer, 0) if env.ttl else buf[:env.header_end]
    bare = buf[env.bare_at:]
    if env.properties_count > 8:
        try:
            bare = _without_absolute_expiry(buf, env) + buf[_section_end(buf, env.properties_at):]
        except DecodeError:
            pass  # properties that do not decode are passed on as they came (see Envelope)
    entries = [raw for key, raw in _raw_annotation_entries(buf, env) if key not in extra and key not in drop]
    entries += [_encoded_entry(k, v) for k, v in extra.items()]
    out = header + _annotations_section(entries) + bare
    return out, Envelope(out)


def with_merged_annotations(buf: bytes, env: Envelope, encoded_map: bytes) -> tuple[bytes, Envelope] | None:
    """The message with the entries of `encoded_map` (an encoded AMQP map: the message-annotations
    of a `modified` outcome) merged into its message annotations: same-named keys replaced,
    every value keeping the exact encoding its sender gave it; the rest stays byte for byte
    (delivery annotations are dropped). The copy is parsed again: it is checked like an
    arriving message (DecodeError when it would not pass). None for an empty map."""
    if not encoded_map or encoded_map[0] not in (0xC1, 0xD1):
        raise DecodeError("message annotations of a modified outcome are not a map")
    new = _raw_map_entries(encoded_map, 0)
    if not new:
        return None
    keys = {key for key, _ in new}
    entries = [raw for key, raw in _raw_annotation_entries(buf, env) if key not in keys]
    entries += [raw for _, raw in new]
    out = buf[:env.header_end] + _annotations_section(entries) + buf[env.bare_at:]
    return out, Envelope(out)


def _annotations_section(entries: list[bytes]) -> bytes:
    """A message-annotations section holding the encoded key+value `entries` (none: no section)."""
    if not entries:
        return b""
    body = b"".join(entries)
    count = len(entries) * 2
    if len(body) + 1 < 256 and count < 256:
        return b"\x00\x53\x72\xc1" + bytes((len(body) + 1, count)) + body
    return b"\x00\x53\x72\xd1" + struct.pack(">II", len(body) + 4, count) + body


_KEYS: dict[str, bytes] = {}
_SYMBOL_KEYS: dict[str, Symbol] = {}
# Encoded key + string value of the annotations the broker writes again and again on copies
# (x-opt-ORIG-ADDRESS, x-opt-ORIG-QUEUE: a few addresses and divert names): encoding them each
# time was a third of a divert copy's cost (benchmarks/fanout.py). Emptied when full.
_ENTRIES: dict[tuple[str, str], bytes] = {}
MAX_CACHED_ENTRIES = 1024
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_LONG = struct.Struct(">Bq")  # a long's type code (0x81) and value


def _encoded_entry(key: str, value) -> bytes:
    """`key` as a symbol and `value` encoded, as `encode` would (a Python int as a long)."""
    kind = type(value)
    if kind is str:
        entry = _ENTRIES.get((key, value))
        if entry is None:
            if len(_ENTRIES) >= MAX_CACHED_ENTRIES:
                _ENTRIES.clear()
            entry = _ENTRIES[(key, value)] = _encoded_key(key) + encode(value)
        return entry
    if kind is int and _LONG_MIN <= value <= _LONG_MAX:  # the x-opt-ORIG-MESSAGE-ID of every copy
        return _encoded_key(key) + _LONG.pack(0x81, value)
    return _encoded_key(key) + encode(value)


def _symbol_key(key: str) -> Symbol:
    symbol = _SYMBOL_KEYS.get(key)
    if symbol is None:
        symbol = Symbol(key)
        if len(_SYMBOL_KEYS) < 1000:  # as _KEYS
            _SYMBOL_KEYS[key] = symbol
    return symbol


def _encoded_key(key: str) -> bytes:
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = encode(Symbol(key))
        if len(_KEYS) < 1000:  # the broker's own few keys; a bound against anything else
            _KEYS[key] = encoded
    return encoded


def _section_end(buf: bytes, start: int) -> int:
    return skip(buf, start + 3 if buf[start + 1] == 0x53 else skip(buf, start + 1))


def _without_absolute_expiry(buf: bytes, env: Envelope) -> bytes:
    """The bare message up to the end of its properties section, with absolute-expiry-time
    (field 8) set to null; the other fields keep their exact encoding."""
    start = env.properties_at
    p = start + 3 if buf[start + 1] == 0x53 else skip(buf, start + 1)
    code = buf[p]
    first = p + 3 if code == 0xC0 else p + 9
    fields, q = [], first
    for _ in range(env.properties_count):
        end = skip(buf, q)
        fields.append(bytes(buf[q:end]))
        q = end
    fields[8] = b"\x40"
    body = b"".join(fields)
    if len(body) + 1 < 256:
        value = bytes((0xC0, len(body) + 1, len(fields))) + body
    else:
        value = b"\xd0" + struct.pack(">II", len(body) + 4, len(fields)) + body
    return buf[env.bare_at:start] + buf[start:p] + value


def _raw_annotation_entries(buf: bytes, env: Envelope) -> list[tuple[Any, bytes]]:
    """(key, encoded key+value) of each message annotation, values left encoded."""
    start = env.annotations_at
    if start < 0:
        return []
    return _raw_map_entries(buf, start + 3 if buf[start + 1] == 0x53 else skip(buf, start + 1))


def _raw_map_entries(buf: bytes, p: int) -> list[tuple[Any, bytes]]:
    """(key, encoded key+value) of each entry of the map encoded at `p`."""
    code = buf[p]
    if code == 0xC1:
        count, p = buf[p + 2], p + 3
    elif code == 0xD1:
        count, p = _u32(buf, p + 5)[0], p + 9
    else:
        return []
    out = []
    budget = _Budget()
    for _ in range(count // 2):
        key, value_at = _bounded_value(buf, p, budget)
        end = skip(buf, value_at)
        out.append((key, bytes(buf[p:end])))
        p = end
    return out
