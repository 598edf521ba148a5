"""Golden vectors from the real ActiveMQ Classic 5.17 client library (Debian's
libactivemq-java, driven by java/OpenWireGolden.java): every command of the list, in versions 9 to
12, loose and tight, with and without the data-structure cache.

- Java's bytes decode to exactly the commands the Python side builds (field for field, property
  types included);
- re-encoding what was decoded gives Java's bytes back, byte for byte;
- Java decodes the bytes Hermod encodes and, marshalling the result again, gets the same bytes.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import pytest
from openwire_samples import JAVA_CACHE_SIZE, expected_commands, for_version, run_java, without_traces

from hermod.broker.openwire import bodies
from hermod.broker.openwire import model as m
from hermod.broker.openwire.engine import Marshaller
from hermod.broker.openwire.framing import FrameReader, frame

COMBINATIONS = [(v, t, c, True) for v in (9, 10, 11, 12) for t in (False, True) for c in (False, True)]
COMBINATIONS += [(12, t, c, False) for t in (False, True) for c in (False, True)]


@functools.cache
def golden() -> dict[tuple[int, bool, bool, bool], list[tuple[str, bytes]]]:
    out: dict[tuple[int, bool, bool, bool], list[tuple[str, bytes]]] = defaultdict(list)
    for line in run_java("golden"):
        version, tight, cache, trace, name, data = line.split(" ")
        key = (int(version), tight == "true", cache == "true", trace == "true")
        out[key].append((name, bytes.fromhex(data)))
    return out


def marshaller(version: int, tight: bool, cache: bool, trace: bool) -> Marshaller:
    return Marshaller(version, tight=tight, cache=cache, cache_size=JAVA_CACHE_SIZE, stack_trace=trace)


def body_of(framed: bytes) -> memoryview:
    [body] = FrameReader(len(framed)).feed(framed)
    return body


def property_types(value):
    if isinstance(value, dict):
        return {k: (type(v).__name__, property_types(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [(type(v).__name__, property_types(v)) for v in value]
    return None


def test_the_java_list_and_the_python_list_match():
    names = [name for name, _ in golden()[(12, False, False, True)]]
    assert names == [name for name, _ in expected_commands()]
    assert len(golden()) == len(COMBINATIONS)


@pytest.mark.parametrize(("version", "tight", "cache", "trace"), COMBINATIONS)
def test_java_bytes_decode_to_the_expected_commands(version, tight, cache, trace):
    reader = marshaller(version, tight, cache, trace)
    for (name, data), (expected_name, expected) in zip(golden()[(version, tight, cache, trace)],
                                                       expected_commands()):
        assert name == expected_name
        got = reader.decode(body_of(data))
        want = for_version(expected, version)
        if not trace:
            want = without_traces(want)
        if name == "map":  # Java's HashMap order: compare the map, then take Java's bytes
            assert bodies.decode_map_body(got.content) == bodies.decode_map_body(want.content)
            want.content = got.content
        assert got == want, name
        if isinstance(got, m.Message):
            assert property_types(got.properties) == property_types(want.properties), name


@pytest.mark.parametrize(("version", "tight", "cache", "trace"), COMBINATIONS)
def test_reencoding_gives_javas_bytes(version, tight, cache, trace):
    reader, writer = marshaller(version, tight, cache, trace), marshaller(version, tight, cache, trace)
    for name, data in golden()[(version, tight, cache, trace)]:
        command = reader.decode(body_of(data))
        assert frame(writer.encode(command)) == data, name


def test_java_decodes_what_hermod_encodes():
    lines, names = [], []
    for version, tight, cache, trace in COMBINATIONS:
        writer = marshaller(version, tight, cache, trace)
        for name, command in expected_commands():
            data = frame(writer.encode(for_version(command, version)))
            flags = f"{str(tight).lower()} {str(cache).lower()} {str(trace).lower()}"
            lines.append(f"{version} {flags} {data.hex()}")
            names.append((version, tight, cache, name, type(command).__name__, data.hex()))
    answers = run_java("echo", "\n".join(lines) + "\n")
    assert len(answers) == len(lines)
    for (version, tight, cache, name, cls, sent), answer in zip(names, answers):
        java_class, java_hex = answer.split(" ", 1)
        assert java_class == cls, (version, tight, cache, name, answer)
        assert java_hex == sent, (version, tight, cache, name)


def test_text_bodies_read_as_java_wrote_them():
    commands = dict(golden()[(12, True, False, True)])
    large = Marshaller(12, tight=True).decode(body_of(commands["large"]))
    assert bodies.decode_text(large.content) == "0123456789\u00e9" * 10000
    zipped = Marshaller(12, tight=True).decode(body_of(commands["compressed"]))
    assert zipped.compressed
    assert bodies.decode_text(zipped.content, zipped.compressed) == "compress me " * 1000
    stream = Marshaller(12, tight=True).decode(body_of(commands["stream"]))
    assert bodies.decode_stream_body(stream.content) == ["first", 2, True, 3.5, "z", b"\x01\x02"]
