"""Fidelity client on Azure's pure-Python AMQP stack (`azure.servicebus._pyamqp`, azure-servicebus 7.15.0).

    python pyamqpclient.py send    --url URL --address A --spec SPEC.jsonl --sent SENT.bin
    python pyamqpclient.py receive --url URL --address A --count N --output OUT.bin

Any Python 3.9+ runs it: the library is imported from interop/azure/build/site, where
`bash interop/setup.sh azure` installs it (pip install --target), never into a venv.
The client is the SDK's generic one (SendClient / ReceiveClient) with `use_tls=False` and a SASL
ANONYMOUS credential (PLAIN with user:password@ in the URL): no CBS, no TLS.

send: each line of SPEC is {"n": i, "sections": [[code, typed JSON], ...]} (interop/fidelity/canon.py).
The message is a `_pyamqp.message.Message` with typed values as the library spells them
({"TYPE": AMQPTypes.uint, "VALUE": 5}); its own encoder (encode_payload) gives the bytes appended to
SENT. What it cannot express (see `Unsendable`) is reported, not sent, and the run exits 1.
receive: grants N credits; the raw payload of each delivery (as it reaches the library's
decode_payload) is appended to OUTPUT; each is accepted.
Output: one JSON line per event. Exit 0 done, 1 not all sent, 2 an AMQP error, 3 timed out, 64 usage.
"""
from __future__ import annotations

import json
import struct
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent / "build" / "site"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fidelity"))

from azure.servicebus._pyamqp import ReceiveClient, SendClient, receiver  # noqa: E402
from azure.servicebus._pyamqp._encode import encode_payload  # noqa: E402
from azure.servicebus._pyamqp.authentication import SASLPlainAuth  # noqa: E402
from azure.servicebus._pyamqp.constants import AUTH_TYPE_SASL_PLAIN  # noqa: E402
from azure.servicebus._pyamqp.message import Header, Message, Properties  # noqa: E402
from azure.servicebus._pyamqp.sasl import SASLAnonymousCredential  # noqa: E402
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes  # noqa: E402
from cli import arguments  # noqa: E402


class Unsendable(Exception):
    """The case needs something _pyamqp's message model or encoder does not have."""


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


class _Anonymous:
    """SASL ANONYMOUS in the shape the clients take an `auth` (the SDK ships only PLAIN and CBS)."""
    auth_type = AUTH_TYPE_SASL_PLAIN
    sasl = SASLAnonymousCredential()


def _auth(url):
    return SASLPlainAuth(url.username, url.password or "") if url.username else _Anonymous()


_INTEGERS = {"ubyte": AMQPTypes.ubyte, "byte": AMQPTypes.byte, "ushort": AMQPTypes.ushort,
             "short": AMQPTypes.short, "uint": AMQPTypes.uint, "int": AMQPTypes.int,
             "ulong": AMQPTypes.ulong, "long": AMQPTypes.long, "timestamp": AMQPTypes.timestamp}


def typed(value: dict) -> dict:
    """One typed-JSON value as _pyamqp's {TYPE, VALUE}."""
    ((kind, v),) = value.items()
    if kind == "null":
        return {TYPE: AMQPTypes.null, VALUE: None}
    if kind == "boolean":
        return {TYPE: AMQPTypes.boolean, VALUE: v}
    if kind in _INTEGERS:
        return {TYPE: _INTEGERS[kind], VALUE: int(v)}
    if kind == "float":
        # encode_float packs a Python float: a NaN keeps its payload only as far as struct does
        return {TYPE: AMQPTypes.float, VALUE: struct.unpack(">f", bytes.fromhex(v))[0]}
    if kind == "double":
        return {TYPE: AMQPTypes.double, VALUE: struct.unpack(">d", bytes.fromhex(v))[0]}
    if kind in ("decimal32", "decimal64", "decimal128"):
        raise Unsendable(f"_pyamqp has no {kind} from bits: only decimal128 from a Python Decimal "
                         "(its own conversion), no decimal32/64 at all")
    if kind == "char":
        raise Unsendable("_pyamqp has no char type")
    if kind == "uuid":
        return {TYPE: AMQPTypes.uuid, VALUE: uuid.UUID(v)}
    if kind == "binary":
        return {TYPE: AMQPTypes.binary, VALUE: bytes.fromhex(v)}
    if kind == "string":
        return {TYPE: AMQPTypes.string, VALUE: v}
    if kind == "symbol":
        return {TYPE: AMQPTypes.symbol, VALUE: v.encode("ascii")}
    if kind == "list":
        return {TYPE: AMQPTypes.list, VALUE: [typed(x) for x in v]}
    if kind == "map":
        return {TYPE: AMQPTypes.map, VALUE: [(typed(k), typed(x)) for k, x in v]}
    if kind == "described":
        return {TYPE: AMQPTypes.described, VALUE: (typed(v[0]), typed(v[1]))}
    if kind == "array":
        if "descriptor" in v:
            raise Unsendable("_pyamqp arrays have no descriptor")
        if not v["items"]:
            raise Unsendable("_pyamqp writes an empty array without an element constructor")
        return {TYPE: AMQPTypes.array, VALUE: [typed(x) for x in v["items"]]}
    raise ValueError(f"unknown type {kind}")


def body_value(value: dict):
    """The amqp-value body: _pyamqp writes Message.value with its type-guessing encoder
    (encode_unknown), so it is a plain Python value of a type it guesses right; typed values
    work only inside it (in a list, a map's values, a described value)."""
    ((kind, v),) = value.items()
    if kind == "string" and v:
        return v
    if kind == "boolean" and v:
        return True
    if kind == "double" and typed(value)[VALUE] != 0:
        return typed(value)[VALUE]
    if kind in ("uuid", "binary") and v:
        return typed(value)[VALUE]
    if kind == "int" and v:
        return v
    if kind == "list" and v:
        return [typed(x) for x in v]
    if kind == "map" and v and all("string" in k for k, _ in v):
        return {k["string"]: typed(x) for k, x in v}
    if kind == "described":
        return (typed(v[0]), typed(v[1]))
    raise Unsendable("_pyamqp writes the amqp-value body from a plain Python value (it guesses the type) and "
                     "leaves the section out when the value is falsy: " + (
                         f"no {kind} there" if kind not in ("string", "boolean", "binary", "int", "list", "map")
                         else "an empty or false one is dropped, a map with other keys than strings has no form"))


_HEADER_FIELDS = Header._fields
_PROPERTY_FIELDS = Properties._fields


def _plain(value: dict):
    """A header / properties field as the plain Python value _pyamqp's composite encoder takes."""
    ((kind, v),) = value.items()
    if kind == "null":
        return None
    if kind == "binary":
        return bytes.fromhex(v)
    if kind == "uuid":
        return uuid.UUID(v)
    if kind in ("ulong", "timestamp"):
        return int(v)
    if kind == "symbol":
        return v.encode("ascii")
    return v


def message_of(sections: list) -> Message:
    fields: dict = {}
    for code, value in sections:
        if code == 0x70:
            fields["header"] = Header(*[_plain(f) for f in value["list"]])
        elif code == 0x72:
            fields["message_annotations"] = {k["symbol"].encode(): typed(x) for k, x in value["map"]}
        elif code == 0x73:
            fields["properties"] = Properties(*[_plain(f) for f in value["list"]])
        elif code == 0x74:
            fields["application_properties"] = {k["string"]: typed(x) for k, x in value["map"]}
        elif code == 0x75:
            fields.setdefault("data", []).append(bytes.fromhex(value["binary"]))
        elif code == 0x76:
            fields.setdefault("sequence", []).append([typed(x) for x in value["list"]])
        elif code == 0x77:
            fields["value"] = body_value(value)
        elif code == 0x78:
            fields["footer"] = {typed(k)[VALUE]: typed(x) for k, x in value["map"]}
        else:
            raise ValueError(f"unsupported section 0x{code:x}")
    return Message(**fields)


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def send(args, url) -> int:
    specs = [json.loads(line) for line in Path(args.spec).read_text().splitlines() if line]
    rc = 0
    with open(args.sent, "wb") as out, SendClient(url.netloc.rsplit("@", 1)[-1], args.address, auth=_auth(url),
                                                   use_tls=False, max_message_size=104857600) as client:
        for spec in specs:
            try:
                message = message_of(spec["sections"])
                data = bytes(encode_payload(bytearray(), message))
            except Unsendable as e:
                emit(event="unsendable", n=spec["n"], reason=str(e))
                rc = 1
                continue
            out.write(_frame(data))
            client.send_message(message)  # returns when the broker settled it; raises unless accepted
            emit(event="settled", n=spec["n"], state="accepted")
    emit(event="summary", sent=len(specs), unsendable=rc)
    return rc


class _Receiver(ReceiveClient):
    """Keeps each delivery's id and tag so that it can be accepted."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.deliveries: list = []

    def _message_received(self, frame, message):
        self.deliveries.append((frame[1], frame[2]))
        super()._message_received(frame, message)


def receive(args, url) -> int:
    raw: list[bytes] = []
    decode = receiver.decode_payload

    def keep_raw(buffer):
        raw.append(bytes(buffer))
        try:
            return decode(buffer)
        except Exception as e:  # the library's decoder gives up on a type: the bytes still count
            emit(event="undecodable", n=len(raw) - 1, reason=f"{type(e).__name__}: {e}")
            return Message()

    receiver.decode_payload = keep_raw
    deadline = time.monotonic() + args.timeout
    with open(args.output, "wb") as out, _Receiver(url.netloc.rsplit("@", 1)[-1], args.address, auth=_auth(url),
                                                    use_tls=False, link_credit=max(args.count, 1),
                                                    max_message_size=104857600) as client:
        got = 0
        while got < args.count:
            if time.monotonic() > deadline:
                emit(event="timeout", seconds=args.timeout)
                return 3
            for _ in client.receive_message_batch(max_batch_size=args.count - got, timeout=1):
                out.write(_frame(raw[got]))
                emit(event="message", n=got, size=len(raw[got]), raw=True)
                got += 1
        for delivery_id, tag in client.deliveries[:got]:
            client.settle_messages(delivery_id, tag, "accepted")
    emit(event="summary", received=got)
    return 0


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    url = urlparse(args.url)
    try:
        return send(args, url) if args.mode == "send" else receive(args, url)
    except Exception as e:  # an AMQP or connection error: one line, exit 2
        emit(event="error", where=args.mode, description=f"{type(e).__name__}: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
