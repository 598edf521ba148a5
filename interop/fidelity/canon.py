"""The fidelity matrix's canonical form of AMQP values and messages ("typed JSON").

Every AMQP value is a one-key JSON object naming its type, so a dump keeps the exact AMQP type and
compares equal across clients and languages:

    {"null": null}  {"boolean": true}  {"ubyte": 255} ... {"int": -5}       (8-32 bit integers)
    {"ulong": "18446744073709551615"}  {"long": "-1"}  {"timestamp": "0"}  (64-bit: decimal strings,
                                                                             so JavaScript keeps them)
    {"float": "7fc00000"}  {"double": "7ff0000000000000"}                  (IEEE bits, NaN-exact)
    {"decimal32": "<8 hex>"}  {"decimal64": "<16 hex>"}  {"decimal128": "<32 hex>"}
    {"char": 128512}  {"uuid": "…-…"}  {"binary": "<hex>"}  {"string": "…"}  {"symbol": "…"}
    {"list": [v, …]}  {"map": [[k, v], …]}  {"described": [descriptor, value]}
    {"array": {"type": "int", "items": [v, …], "descriptor": d}}           (descriptor optional)

A message is its sections in order, each `[section code, value]` (0x70 header … 0x78 footer).
Works with python-qpid-proton 0.37 (Debian's) and 0.40 (the project's), through its `Data` codec.
"""
from __future__ import annotations

import struct
import uuid

from proton import Data

BARE_SECTIONS = (0x73, 0x74, 0x75, 0x76, 0x77)  # properties, application-properties, body sections

_SIMPLE = {  # type name -> (Data type code, getter, putter)
    "boolean": (Data.BOOL, "get_bool", "put_bool"),
    "ubyte": (Data.UBYTE, "get_ubyte", "put_ubyte"), "byte": (Data.BYTE, "get_byte", "put_byte"),
    "ushort": (Data.USHORT, "get_ushort", "put_ushort"), "short": (Data.SHORT, "get_short", "put_short"),
    "uint": (Data.UINT, "get_uint", "put_uint"), "int": (Data.INT, "get_int", "put_int"),
    "ulong": (Data.ULONG, "get_ulong", "put_ulong"), "long": (Data.LONG, "get_long", "put_long"),
    "timestamp": (Data.TIMESTAMP, "get_timestamp", "put_timestamp"),
    "float": (Data.FLOAT, "get_float", "put_float"), "double": (Data.DOUBLE, "get_double", "put_double"),
    "decimal32": (Data.DECIMAL32, "get_decimal32", "put_decimal32"),
    "decimal64": (Data.DECIMAL64, "get_decimal64", "put_decimal64"),
    "decimal128": (Data.DECIMAL128, "get_decimal128", "put_decimal128"),
    "char": (Data.CHAR, "get_char", "put_char"), "uuid": (Data.UUID, "get_uuid", "put_uuid"),
    "binary": (Data.BINARY, "get_binary", "put_binary"), "string": (Data.STRING, "get_string", "put_string"),
    "symbol": (Data.SYMBOL, "get_symbol", "put_symbol"),
}
_NAME_OF = {code: name for name, (code, _, _) in _SIMPLE.items()}
_NAME_OF.update({Data.NULL: "null", Data.LIST: "list", Data.MAP: "map", Data.ARRAY: "array",
                 Data.DESCRIBED: "described"})
_CODE_OF = {name: code for code, name in _NAME_OF.items()}
_WIDE = ("ulong", "long", "timestamp")


def _to_json(kind: str, v):
    if kind in _WIDE:
        return str(int(v))
    if kind == "float":
        return struct.pack(">f", v).hex()
    if kind == "double":
        return struct.pack(">d", v).hex()
    if kind == "decimal32":
        return int(v).to_bytes(4, "big").hex()
    if kind == "decimal64":
        return int(v).to_bytes(8, "big").hex()
    if kind == "decimal128":
        return bytes(v).hex()
    if kind == "char":
        return ord(v)
    if kind == "uuid":
        return str(v)
    if kind == "binary":
        return bytes(v).hex()
    if kind in ("string", "symbol"):
        return str(v)
    if kind == "boolean":
        return bool(v)
    return int(v)


def _from_json(kind: str, v):
    if kind in _WIDE:
        return int(v)
    if kind == "float":
        return struct.unpack(">f", bytes.fromhex(v))[0]
    if kind == "double":
        return struct.unpack(">d", bytes.fromhex(v))[0]
    if kind in ("decimal32", "decimal64"):
        return int.from_bytes(bytes.fromhex(v), "big")
    if kind == "decimal128":
        return bytes.fromhex(v)
    if kind == "char":
        return chr(v)
    if kind == "uuid":
        return uuid.UUID(v)
    if kind == "binary":
        return bytes.fromhex(v)
    return v


def read_value(d: Data) -> dict:
    """The current value of `d` (after next()) as typed JSON."""
    kind = _NAME_OF[d.type()]
    if kind == "null":
        return {"null": None}
    if kind == "list":
        count = d.get_list()
        return {"list": _children(d, count)}
    if kind == "map":
        items = _children(d, d.get_map())
        return {"map": [[items[i], items[i + 1]] for i in range(0, len(items), 2)]}
    if kind == "described":
        return {"described": _children(d, 2)}
    if kind == "array":
        count, described, element = d.get_array()
        d.enter()
        out: dict = {"type": _NAME_OF[element]}
        if described:
            d.next()
            out["descriptor"] = read_value(d)
        items = []
        for _ in range(count):
            d.next()
            items.append(read_value(d))
        d.exit()
        out["items"] = items
        return {"array": out}
    return {kind: _to_json(kind, getattr(d, _SIMPLE[kind][1])())}


def _children(d: Data, count: int) -> list:
    d.enter()
    out = []
    for _ in range(count):
        d.next()
        out.append(read_value(d))
    d.exit()
    return out


def write_value(d: Data, value: dict) -> None:
    """Put one typed-JSON value into `d`."""
    ((kind, v),) = value.items()
    if kind == "null":
        d.put_null()
    elif kind == "list":
        d.put_list()
        _put_children(d, v)
    elif kind == "map":
        d.put_map()
        _put_children(d, [x for pair in v for x in pair])
    elif kind == "described":
        d.put_described()
        _put_children(d, v)
    elif kind == "array":
        d.put_array("descriptor" in v, _CODE_OF[v["type"]])
        _put_children(d, ([v["descriptor"]] if "descriptor" in v else []) + v["items"])
    else:
        getattr(d, _SIMPLE[kind][2])(_from_json(kind, v))


def _put_children(d: Data, values: list) -> None:
    d.enter()
    for x in values:
        write_value(d, x)
    d.exit()


def encode_message(sections: list) -> bytes:
    """Encode `[[code, value], ...]` as the sections of one message."""
    out = []
    for code, value in sections:
        d = Data()
        d.put_described()
        d.enter()
        d.put_ulong(code)
        write_value(d, value)
        d.exit()
        out.append(d.encode())
    return b"".join(out)


def decode_message(buf: bytes) -> list:
    """The sections of an encoded message as `[[code, value], ...]` (a symbolic descriptor is
    mapped to its code)."""
    out = []
    pos = 0
    while pos < len(buf):
        d = Data()
        used = d.decode(buf[pos:])
        if used <= 0:
            raise ValueError(f"undecodable section at byte {pos}")
        d.rewind()
        d.next()
        described = read_value(d)["described"]
        descriptor, value = described
        code = int(descriptor["ulong"]) if "ulong" in descriptor else _SYMBOLIC[descriptor["symbol"]]
        out.append([code, value])
        pos += used
    return out


def section_spans(buf: bytes) -> list[tuple[int, int, int]]:
    """(code, start, end) of each section of an encoded message, without decoding the values."""
    spans = []
    pos = 0
    while pos < len(buf):
        d = Data()
        used = d.decode(buf[pos:])
        if used <= 0:
            raise ValueError(f"undecodable section at byte {pos}")
        d.rewind()
        d.next()
        d.enter()
        d.next()
        code = d.get_ulong() if d.type() == Data.ULONG else _SYMBOLIC[d.get_symbol()]
        spans.append((code, pos, pos + used))
        pos += used
    return spans


def bare_bytes(buf: bytes) -> bytes:
    """The bare message: properties, application-properties and body sections, as encoded."""
    return b"".join(buf[s:e] for code, s, e in section_spans(buf) if code in BARE_SECTIONS)


_SYMBOLIC = {"amqp:header:list": 0x70, "amqp:delivery-annotations:map": 0x71,
             "amqp:message-annotations:map": 0x72, "amqp:properties:list": 0x73,
             "amqp:application-properties:map": 0x74, "amqp:data:binary": 0x75,
             "amqp:amqp-sequence:list": 0x76, "amqp:amqp-value:*": 0x77, "amqp:footer:map": 0x78}


# -- the files the clients exchange with the test: length-prefixed encoded messages ----------

def write_frames(path, messages) -> None:
    with open(path, "wb") as f:
        for m in messages:
            f.write(len(m).to_bytes(4, "big"))
            f.write(m)


def read_frames(path) -> list[bytes]:
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 4 <= len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        out.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out
