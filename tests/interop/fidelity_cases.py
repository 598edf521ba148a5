"""The messages of the fidelity matrix, in the typed JSON of interop/fidelity/canon.py.

Each case is one message: `(case id, [[section code, value], ...])`. Every AMQP type at its limits
(and across its encodings: uint0 / smalluint / uint, vbin8 / vbin32, ...) as the body, inside a
list, a map, an array and a described value, and as application-properties values where the
spec allows it (simple types only); every header and properties field; amqp-sequence bodies;
several data sections; data bodies from 0 bytes to 10 MB across frame boundaries.
"""
from __future__ import annotations

HEADER, PROPERTIES, APP_PROPS, DATA, SEQUENCE, VALUE, FOOTER = 0x70, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78
FRAME = 1048576  # the broker's default max-frame-size


def _w(kind, *values):
    return [{kind: v} for v in values]


def _hex_bytes(n: int, seed: int = 0) -> str:
    return bytes((i * 31 + seed) & 0xFF for i in range(n)).hex()


SCALARS: dict[str, list[dict]] = {
    "null": [{"null": None}],
    "boolean": _w("boolean", True, False),
    "ubyte": _w("ubyte", 0, 1, 255),
    "byte": _w("byte", -128, -1, 0, 127),
    "ushort": _w("ushort", 0, 256, 65535),
    "short": _w("short", -32768, -1, 32767),
    "uint": _w("uint", 0, 255, 256, 4294967295),
    "int": _w("int", -2147483648, -129, -128, 127, 128, 2147483647),
    "ulong": _w("ulong", "0", "255", "256", "18446744073709551615"),
    "long": _w("long", "-9223372036854775808", "-129", "-128", "127", "128", "9223372036854775807"),
    "float": _w("float", "00000000", "80000000", "3fc00000", "7f7fffff", "00000001", "ff7fffff",
                "7f800000", "ff800000", "7fc00000"),
    "double": _w("double", "0000000000000000", "8000000000000000", "3ff8000000000000", "7fefffffffffffff",
                 "0000000000000001", "7ff0000000000000", "fff0000000000000", "7ff8000000000000"),
    "decimal32": _w("decimal32", "00000000", "2200000c", "77f8967f", "f8000000"),
    "decimal64": _w("decimal64", "0000000000000000", "2238000000000001", "77fb86f26fc0ffff"),
    "decimal128": _w("decimal128", "00" * 16, "22080000000000000000000000000001", "ff" * 16),
    "char": _w("char", 0, 65, 0xE9, 0xFFFF, 0x1F600, 0x10FFFF),
    "timestamp": _w("timestamp", "0", "1700000000123", "-1", "-9223372036854775808", "9223372036854775807"),
    "uuid": _w("uuid", "00000000-0000-0000-0000-000000000000", "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
               "ffffffff-ffff-ffff-ffff-ffffffffffff"),
    "binary": _w("binary", "", "00", _hex_bytes(255), _hex_bytes(256, 7)),
    "string": _w("string", "", "a", "h\u00e9llo w\u00f6rld \u4e16\u754c \U0001F600", "x" * 255, "y" * 256,
                 "nul\u0000inside"),
    "symbol": _w("symbol", "", "a", "amqp:x-opt.sym", "s" * 256),
}
SIMPLE = list(SCALARS)  # every scalar type is a "simple type" (allowed in application-properties)


def _value_body(value) -> list:
    return [[VALUE, value]]


def _cases() -> list[tuple[str, list]]:
    cases: list[tuple[str, list]] = []
    for kind, values in SCALARS.items():
        for i, v in enumerate(values):
            cases.append((f"value.{kind}.{i}", _value_body(v)))
        cases.append((f"list.{kind}", _value_body({"list": values})))
        cases.append((f"map.{kind}", _value_body(
            {"map": [[{"string": f"k{i}"}, v] for i, v in enumerate(values)]})))
        if kind != "null":  # a map keyed by the type's own values (null keys are not distinct)
            cases.append((f"map-keys.{kind}", _value_body(
                {"map": [[v, {"int": i}] for i, v in enumerate(_distinct(values))]})))
        cases.append((f"array.{kind}", _value_body({"array": {"type": kind, "items": values}})))
        cases.append((f"array-empty.{kind}", _value_body({"array": {"type": kind, "items": []}})))
        cases.append((f"described.{kind}", _value_body(
            {"list": [{"described": [{"symbol": "example:thing"}, v]} for v in values]
             + [{"described": [{"ulong": "1311768467463790320"}, values[-1]]}]})))
        cases.append((f"app-props.{kind}", [
            [APP_PROPS, {"map": [[{"string": f"p{i}"}, v] for i, v in enumerate(values)]}],
            [VALUE, {"string": kind}]]))
    # compound nesting
    cases += [
        ("value.list-empty", _value_body({"list": []})),
        ("value.map-empty", _value_body({"map": []})),
        ("value.nested", _value_body({"list": [
            {"map": [[{"symbol": "a"}, {"list": [{"int": 1}, {"null": None}]}],
                     [{"ulong": "5"}, {"map": [[{"string": "deep"}, {"array": {"type": "long", "items": _w("long", "1", "-1")}}]]}]]},
            {"array": {"type": "list", "items": [{"list": [{"int": 1}]}, {"list": []}]}},
            {"array": {"type": "map", "items": [{"map": [[{"string": "m"}, {"boolean": True}]]}]}},
            {"array": {"type": "array", "items": [{"array": {"type": "int", "items": _w("int", 1, 2)}},
                                                  {"array": {"type": "int", "items": []}}]}},
        ]})),
        ("array.described", _value_body({"array": {"type": "string", "descriptor": {"symbol": "example:name"},
                                                   "items": _w("string", "a", "b", "")}})),
        ("value.list-large", _value_body({"list": [{"int": i} for i in range(3000)]})),
        ("value.map-large", _value_body({"map": [[{"string": f"key{i}"}, {"long": str(i)}] for i in range(2000)]})),
        ("value.described-list", _value_body({"described": [{"ulong": "119"}, {"list": []}]})),
    ]
    # properties: every field, with each message-id / correlation-id type
    ids = {"ulong": {"ulong": "18446744073709551615"}, "uuid": {"uuid": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6"},
           "binary": {"binary": "00ff10"}, "string": {"string": "ID:order-1"}}
    for name, mid in ids.items():
        cases.append((f"properties.all.{name}", [
            [HEADER, {"list": [{"boolean": True}, {"ubyte": 9}, {"uint": 3600000}, {"boolean": True}, {"uint": 0}]}],
            [PROPERTIES, {"list": [mid, {"binary": "7573657231"}, {"string": "queue://to"}, {"string": "subject"},
                                   {"string": "reply-here"}, mid, {"symbol": "text/plain"}, {"symbol": "gzip"},
                                   {"timestamp": "4102444800000"}, {"timestamp": "1700000000000"},
                                   {"string": "group-1"}, {"uint": 4294967295}, {"string": "reply-group"}]}],
            [APP_PROPS, {"map": [[{"string": "k"}, {"string": "v"}]]}],
            [VALUE, {"string": "all properties"}]]))
    cases.append(("properties.sparse", [
        [PROPERTIES, {"list": [{"null": None}, {"null": None}, {"null": None}, {"string": "only subject"}]}],
        [VALUE, {"null": None}]]))
    cases.append(("header.defaults-explicit", [
        [HEADER, {"list": [{"boolean": False}, {"ubyte": 4}, {"null": None}, {"boolean": False}, {"uint": 0}]}],
        [VALUE, {"int": 1}]]))
    # body sections other than amqp-value
    cases += [
        ("sequence.one", [[SEQUENCE, {"list": [{"int": 1}, {"string": "two"}, {"null": None}]}]]),
        ("sequence.empty", [[SEQUENCE, {"list": []}]]),
        ("sequence.three", [[SEQUENCE, {"list": [{"int": i}]} ] for i in range(3)]),
        ("data.three", [[DATA, {"binary": "01"}], [DATA, {"binary": ""}], [DATA, {"binary": _hex_bytes(300)}]]),
        ("data.with-footer", [[DATA, {"binary": "abcd"}], [FOOTER, {"map": [[{"symbol": "sig"}, {"binary": "00"}]]}]]),
    ]
    for size in (0, 1, 255, 256, 65535, 65536, 65537, FRAME - 64, FRAME - 1, FRAME, FRAME + 1,
                 2 * FRAME + 17, 10 * 1000 * 1000):
        cases.append((f"data.size-{size}", [[DATA, {"binary": _hex_bytes(size, size)}]]))
    return cases


def _distinct(values: list) -> list:
    seen, out = set(), []
    for v in values:
        key = repr(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


CASES = _cases()
