"""Which protocol a connection speaks, from its first bytes (every listener, one port for all).

Pure: bytes in, a verdict out; the front door (door.py) feeds it what has arrived so far. Each
protocol's opening is fixed by its specification, so a few bytes tell them apart:

| protocol | the first bytes | bytes needed |
|---|---|---|
| AMQP 1.0 | `AMQP` then the protocol id: 0 (plain), 3 (SASL) | 5 |
| OpenWire | a 4-byte size (under 16 MiB: its first byte is 0), the WireFormatInfo type (1), the magic `ActiveMQ` | 13 |
| STOMP | `CONNECT` or `STOMP`, then an end of line (1.2 allows end-of-lines before a frame) | up to 9 after them |
| MQTT | CONNECT (0x10), a remaining length (1-4 bytes), the protocol name `MQTT` (3.1.1, 5.0) or `MQIsdp` (3.1) | up to 14 |
| HTTP | a request line's method (`GET `, `POST`, ...): the wrong port, told so at once | 4 |
| TLS | a handshake record (0x16 0x03): TLS on a plain port, closed with a log line | 2 |

Anything else, once enough bytes are there to rule every enabled protocol out, is `UNKNOWN`.
Costs O(bytes looked at), at most MAX_LOOK bytes (leading end-of-lines of STOMP aside, bounded too).
"""
from __future__ import annotations

AMQP = "amqp"
OPENWIRE = "openwire"
STOMP = "stomp"
MQTT = "mqtt"
PROTOCOLS = (AMQP, OPENWIRE, STOMP, MQTT)

HTTP = "http"        # not served on a protocol port: answered with a short 400 and closed
TLS = "tls"          # a TLS client on a plain port
UNKNOWN = "unknown"  # nothing enabled starts like this
MORE = None          # not enough bytes yet

MAX_LOOK = 64                 # bytes a verdict may need (STOMP's leading end-of-lines included)
_STOMP_LEADING_EOLS = 32      # a client may send heart-beat end-of-lines before CONNECT
# (HTTP's CONNECT is left out: its first bytes are STOMP's.)
_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"TRAC")
_OPENWIRE_MAGIC = b"ActiveMQ"
_MQTT_NAMES = (b"\x00\x04MQTT", b"\x00\x06MQIsdp")


def _amqp(data: bytes) -> str | None | bool:
    """True: AMQP; False: not AMQP; MORE: cannot tell yet."""
    n = min(len(data), 4)
    if data[:n] != b"AMQP"[:n]:
        return False
    return True if n == 4 else MORE


def _openwire(data: bytes):
    # Size-prefixed WireFormatInfo: [size:4][type:1 = 1][magic:8 = "ActiveMQ"]... A
    # WireFormatInfo is a few hundred bytes, so its size's first byte is 0: that rules
    # OpenWire out at once for every other protocol's opening.
    if data[0] != 0:
        return False
    if len(data) >= 5 and data[4] != 1:
        return False
    head = data[5:13]
    if head != _OPENWIRE_MAGIC[:len(head)]:
        return False
    return True if len(data) >= 13 else MORE


def _stomp(data: bytes):
    i = 0
    while i < len(data) and i < _STOMP_LEADING_EOLS and data[i] in b"\r\n":
        i += 1
    if i == len(data):
        return MORE if i < _STOMP_LEADING_EOLS else False
    rest = data[i:]
    undecided = False
    for command in (b"CONNECT", b"STOMP"):
        wanted = command + b"\n"
        if rest[:len(wanted)] == wanted or rest[:len(command) + 2] == command + b"\r\n":
            return True
        if wanted.startswith(rest[:len(wanted)]) or (command + b"\r\n").startswith(rest[:len(command) + 2]):
            undecided = True
    return MORE if undecided else False


def _mqtt(data: bytes):
    if data[:1] != b"\x10":
        return False
    # The remaining length: 1 to 4 bytes, 7 bits each, the high bit says another follows.
    i = 1
    while True:
        if i >= len(data):
            return MORE
        if i > 4:
            return False
        if not data[i] & 0x80:
            break
        i += 1
    name = data[i + 1:i + 9]
    for wanted in _MQTT_NAMES:
        if name[:len(wanted)] == wanted:
            return True
        if wanted.startswith(name) and len(name) < len(wanted):
            return MORE
    return False


_CHECKS = {AMQP: _amqp, OPENWIRE: _openwire, STOMP: _stomp, MQTT: _mqtt}


def detect(data: bytes, enabled: tuple[str, ...] | frozenset[str] = PROTOCOLS) -> str | None:
    """The protocol `data` (a connection's first bytes) opens with, among `enabled`; MORE (None)
    when more bytes are needed; HTTP, TLS or UNKNOWN when it is none of them."""
    if not data:
        return MORE
    data = data[:MAX_LOOK]
    undecided = False
    for protocol in PROTOCOLS:
        if protocol not in enabled:
            continue
        verdict = _CHECKS[protocol](data)
        if verdict is True:
            return protocol
        if verdict is MORE:
            undecided = True
    if undecided and len(data) < MAX_LOOK:
        return MORE
    if data[:2] == b"\x16\x03":
        return TLS
    if data == b"\x16":
        return MORE
    head = data[:4]
    if any(m.startswith(head) for m in _HTTP_METHODS):
        if len(head) == 4:
            return HTTP
        return MORE if len(data) < 4 else UNKNOWN
    return UNKNOWN
