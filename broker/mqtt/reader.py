"""The packet reader: feed it bytes as they arrive, get complete packets.

The fixed header is one byte of type and flags and a remaining length of one to four bytes; a
fifth continuation byte is malformed at once (no waiting for more). The packet's total size is
checked against the caller's maximum as soon as the remaining length is known, before any of the
body is kept: the contract's `max_message_size` and the MQTT 5 Maximum Packet Size both bound the
whole packet. Work is O(bytes): the buffer is consumed by offset and compacted once per feed.

Without a `version` the reader is the server side's: the first packet must be a CONNECT (anything
else is refused at its fixed header), and the CONNECT fixes the protocol level of what follows; a
client gives `version` itself. An error carries in `packets` the complete packets that came
before the bad one in the same feed (the adapter handles them, then closes); after an error the
reader refuses further input.
"""
from __future__ import annotations

from .codec import decode
from .errors import PACKET_TOO_LARGE, PROTOCOL_ERROR, MqttError, malformed
from .packets import MQTT_5, Connect, Packet


class PacketReader:
    def __init__(self, max_packet_size: int, version: int | None = None) -> None:
        self.max_packet_size = max_packet_size
        self.version = version  # None until a CONNECT has been read
        self._buffer = bytearray()
        self._failed: MqttError | None = None
        self._connected = False

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete packet (bounded by the maximum packet size)."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Packet]:
        if self._failed is not None:
            raise self._failed
        # Whole packets are cut straight from `data` (one copy per body); only an incomplete
        # tail is kept in the buffer, to which the next feed appends.
        buf: bytes | bytearray
        if self._buffer:
            buf = self._buffer
            buf += data
        else:
            buf = data if isinstance(data, bytes) else bytes(data)
        packets: list[Packet] = []
        pos = 0
        end = len(buf)
        try:
            while end - pos >= 2:
                # Remaining length: up to four bytes of seven bits each.
                length = 0
                shift = 0
                i = pos + 1
                while True:
                    if i >= end:
                        length = -1
                        break
                    b = buf[i]
                    i += 1
                    length |= (b & 0x7F) << shift
                    if not b & 0x80:
                        break
                    shift += 7
                    if shift == 28:
                        raise malformed("remaining length longer than four bytes")
                if length < 0:
                    break  # the remaining length is still arriving
                header = i - pos
                if self.version is None and buf[pos] >> 4 != 1:
                    raise MqttError(PROTOCOL_ERROR, "the first packet is not a CONNECT")
                total = header + length
                if total > self.max_packet_size:
                    raise MqttError(PACKET_TOO_LARGE,
                                    f"packet of {total} bytes over the maximum of {self.max_packet_size}")
                if header > 2 and buf[i - 1] == 0 and self.version == MQTT_5:
                    raise malformed("remaining length not in its shortest form")
                if end - i < length:
                    break
                first = buf[pos]
                body = buf[i:i + length] if isinstance(buf, bytes) else bytes(buf[i:i + length])
                pos = i + length
                version = self.version
                packet = decode(first, body, version if version is not None else 4)
                if isinstance(packet, Connect):
                    if self._connected:
                        raise MqttError(PROTOCOL_ERROR, "a second CONNECT")
                    self._connected = True
                    self.version = packet.protocol_level
                    if header > 2 and buf[i - 1] == 0 and packet.protocol_level == MQTT_5:
                        raise malformed("remaining length not in its shortest form")
                packets.append(packet)
        except MqttError as e:
            e.packets = packets
            self._failed = e
            self._buffer = bytearray()
            raise
        if buf is self._buffer:
            if pos:
                del self._buffer[:pos]
        elif pos < len(buf):
            self._buffer = bytearray(buf[pos:])
        return packets
