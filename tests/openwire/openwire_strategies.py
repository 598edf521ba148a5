"""Hypothesis strategies for every OpenWire type, derived from the same field declarations the
engines read (model.py), so a field added there is generated here without more code."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from hermod.broker.openwire import model as m
from hermod.broker.openwire.values import Byte, Char, Float, Long, Short

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
# The tight encoding's long forms change at 16 and 32 bits and for negative values.
LONG = st.one_of(
    st.sampled_from([0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, 1 << 32, -1, -(1 << 63), (1 << 63) - 1]),
    st.integers(-(1 << 63), (1 << 63) - 1))
# Java strings are UTF-16: a lone surrogate pair and the character it encodes are the same
# Java string, so generated text has no surrogates (non-BMP characters and NUL are in).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
STRINGS = st.none() | TEXT
CHAR = st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)).map(Char)

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-128, 127).map(Byte), CHAR,
    st.integers(-32768, 32767).map(Short), INT32,
    st.integers(-(1 << 63), (1 << 63) - 1).map(Long),
    st.floats(width=32, allow_nan=False).map(Float), st.floats(allow_nan=False),
    TEXT, st.binary(max_size=30))
PRIMITIVES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12)
PROPERTY_MAPS = st.none() | st.dictionaries(TEXT, PRIMITIVES, max_size=6)

LEAVES = [m.BrokerId, m.ConnectionId, m.SessionId, m.ConsumerId, m.ProducerId, m.MessageId,
          m.LocalTransactionId, m.XATransactionId, m.Queue, m.Topic, m.TempQueue, m.TempTopic]
COMMANDS = sorted((cls for cls in m.TYPES.values()
                   if issubclass(cls, (m.BaseCommand, m.WireFormatInfo))), key=lambda c: c.TYPE)

THROWABLES = st.deferred(lambda: st.none() | st.builds(
    m.Throwable, STRINGS, STRINGS,
    st.lists(st.builds(m.StackTraceElement, STRINGS, STRINGS, STRINGS, INT32), max_size=3).map(tuple),
    THROWABLES))


def of_kind(of: type, depth: int) -> st.SearchStrategy:
    """A value for a nested field declared as `of`: identifiers and destinations (and, one level
    down, messages where a Message is wanted)."""
    choices = [c for c in LEAVES if issubclass(c, of)]
    if of is m.Message or (of is m.DataStructure and depth == 0):
        choices += [c for c in m.TYPES.values() if issubclass(c, m.Message)] if depth == 0 else []
    if not choices:
        choices = [c for c in m.TYPES.values() if issubclass(c, of)]
    return st.one_of([instances(c, depth + 1) for c in choices])


def field_strategy(kind: str, of: type | None, depth: int) -> st.SearchStrategy:
    if kind == m.BOOL:
        return st.booleans()
    if kind == m.BYTE:
        return st.integers(-128, 127)
    if kind == m.INT:
        return INT32
    if kind == m.LONG:
        return LONG
    if kind == m.STRING:
        return STRINGS
    if kind in (m.NESTED, m.CACHED):
        assert of is not None
        return st.none() | of_kind(of, depth)
    if kind == m.ARRAY:
        assert of is not None
        return st.none() | st.lists(of_kind(of, depth), max_size=3).map(tuple)
    if kind == m.BYTES:
        return st.none() | st.binary(max_size=60)
    if kind == m.PROPERTIES:
        return PROPERTY_MAPS
    if kind == m.THROWABLE:
        return THROWABLES
    if kind == m.MAGIC:
        return st.just(b"ActiveMQ")
    raise AssertionError(kind)


def instances(cls: type, depth: int = 0) -> st.SearchStrategy:
    kwargs = {}
    for f in dataclasses.fields(cls):
        kind, _, of = f.metadata["openwire"]
        kwargs[f.name] = field_strategy(kind, of, depth) if depth < 2 else st.just(f.default)
    return st.builds(cls, **kwargs)
