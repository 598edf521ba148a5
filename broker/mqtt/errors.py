"""The codec's one error type and the MQTT 5 reason codes it carries.

Everything malformed, over a limit or against the protocol surfaces as an `MqttError` whose
`reason_code` is the MQTT 5 reason code the adapter puts in its DISCONNECT (or CONNACK before a
session exists); for a 3.x connection the adapter simply closes. No IndexError, struct.error,
UnicodeDecodeError or MemoryError escapes the codec on hostile input.
"""

# MQTT 5.0 reason codes (section 2.4); the 3.1.1 CONNACK return codes are 0x00..0x05.
SUCCESS = 0x00
UNSPECIFIED_ERROR = 0x80
MALFORMED_PACKET = 0x81
PROTOCOL_ERROR = 0x82
IMPLEMENTATION_SPECIFIC_ERROR = 0x83
UNSUPPORTED_PROTOCOL_VERSION = 0x84
CLIENT_IDENTIFIER_NOT_VALID = 0x85
BAD_USER_NAME_OR_PASSWORD = 0x86
NOT_AUTHORIZED = 0x87
TOPIC_FILTER_INVALID = 0x8F
TOPIC_NAME_INVALID = 0x90
RECEIVE_MAXIMUM_EXCEEDED = 0x93
TOPIC_ALIAS_INVALID = 0x94
PACKET_TOO_LARGE = 0x95
QUOTA_EXCEEDED = 0x97
PAYLOAD_FORMAT_INVALID = 0x99
SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E

# MQTT 3.1 / 3.1.1 CONNACK return codes.
V3_ACCEPTED = 0x00
V3_UNACCEPTABLE_PROTOCOL_VERSION = 0x01
V3_IDENTIFIER_REJECTED = 0x02
V3_SERVER_UNAVAILABLE = 0x03
V3_BAD_USER_NAME_OR_PASSWORD = 0x04
V3_NOT_AUTHORIZED = 0x05


class MqttError(Exception):
    """Bytes that are not a valid MQTT packet, or a packet against the protocol. `reason_code`
    is the MQTT 5 reason code for the DISCONNECT (0x81 malformed, 0x82 protocol error, 0x95
    packet too large, 0x90 topic name invalid, 0x8F topic filter invalid, ...)."""

    def __init__(self, reason_code: int, message: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code
        self.packets: list = []  # PacketReader: the good packets before the bad one


def malformed(message: str) -> MqttError:
    return MqttError(MALFORMED_PACKET, message)


def protocol_error(message: str) -> MqttError:
    return MqttError(PROTOCOL_ERROR, message)
