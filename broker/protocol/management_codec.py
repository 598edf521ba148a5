"""The codec side of management (`management.ports.MessageCodec`): a message's body made
readable for a peek, and a message built from a management send or an `explain` request."""
from __future__ import annotations

import base64
import uuid
from typing import Any

from ..core.message import Message
from ..management.render import jsonable
from . import codec
from .codec import AMQP_SEQUENCE, AMQP_VALUE, APPLICATION_PROPERTIES, DATA, HEADER, PROPERTIES


class ManagementCodec:
    def readable_body(self, encoded: bytes) -> tuple[Any, str]:
        """Text when it is text (an amqp-value string, or data sections that are UTF-8), base64
        for other binary, JSON for other AMQP values (`amqp-value`, `amqp-sequence`)."""
        try:
            parts = [(d, start) for d, start, _end in codec.sections(encoded)
                     if d in (DATA, AMQP_VALUE, AMQP_SEQUENCE)]
            if not parts:
                return None, "none"
            kind = parts[0][0]
            if kind == DATA:  # one or more data sections: their bytes together
                value: Any = b"".join(bytes(codec.section_value(encoded, s)) for d, s in parts if d == DATA)
            elif kind == AMQP_SEQUENCE:
                return jsonable([codec.section_value(encoded, s) for _d, s in parts]), "amqp-sequence"
            else:
                value = codec.section_value(encoded, parts[0][1])
        except codec.DecodeError:
            return base64.b64encode(encoded).decode("ascii"), "base64"
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return bytes(value).decode("utf-8"), "text"
            except UnicodeDecodeError:
                return base64.b64encode(bytes(value)).decode("ascii"), "base64"
        if isinstance(value, str):
            return str(value), "text"
        return jsonable(value), "amqp-value"

    def new_message(self, address: str, body: Any, properties: dict, durable: bool,
                    routing_type: str | None, arrival_ms: int) -> Message:
        """A text message (amqp-value string, as JMS TextMessages are sent) with a fresh id."""
        parts = []
        if durable:
            parts.append(codec.encode_section(HEADER, [True]))
        parts.append(codec.encode_section(PROPERTIES, [f"ID:{uuid.uuid4()}", None, address]))
        if properties:
            parts.append(codec.encode_section(APPLICATION_PROPERTIES, dict(properties)))
        parts.append(codec.encode_section(AMQP_VALUE, body))
        encoded = b"".join(parts)
        return Message(encoded, codec.Envelope(encoded), address, routing_type, None, arrival_ms)
