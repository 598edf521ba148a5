"""STOMP 1.0, 1.1 and 1.2: a sans-IO codec (no sockets, no broker) for the adapter to drive.

`parser.FrameParser` turns a connection's bytes into frames and heart-beats within the caller's
`Limits`; `encoder.encode_frame` writes the broker's frames escaped per version; `negotiation`
picks the version and heart-beat intervals of CONNECT/CONNECTED; `bodies` is the contract's
text-or-bytes rule for SEND; `names` maps destination names to the address model. Every failure
is a `StompError`, whose message is meant for the ERROR frame's `message` header.
"""

from .bodies import is_text, send_body
from .encoder import encode_frame, escape
from .errors import StompError, UnsupportedVersion
from .frames import (ALL_COMMANDS, CLIENT_COMMANDS, HEARTBEAT, SERVER_COMMANDS, VERSIONS, Frame, Heartbeat,
                     Limits)
from .names import ANYCAST, MULTICAST, Destination, destination_name, parse_destination
from .negotiation import negotiate_heart_beat, negotiate_version, parse_heart_beat
from .parser import FrameParser

__all__ = ["ALL_COMMANDS", "ANYCAST", "CLIENT_COMMANDS", "Destination", "Frame", "FrameParser", "HEARTBEAT",
           "Heartbeat", "Limits", "MULTICAST", "SERVER_COMMANDS", "StompError", "UnsupportedVersion", "VERSIONS",
           "destination_name", "encode_frame", "escape", "is_text", "negotiate_heart_beat", "negotiate_version",
           "parse_destination", "parse_heart_beat", "send_body"]
