"""OpenWire, ActiveMQ Classic's native protocol: a sans-IO codec (no sockets, no broker).

`codec.OpenWireCodec` is the per-connection entry point: feed it bytes, get commands; give it
commands, get bytes; negotiate the wire format from the two WireFormatInfos. `model` declares the
commands and data structures, `engine` marshals them (loose and tight, versions 9 to 12, with the
data-structure cache), `values` is the typed primitive map, `bodies` the message body formats.
"""

from .codec import Negotiated, OpenWireCodec, negotiate, wire_format_info
from .errors import OpenWireError

__all__ = ["Negotiated", "OpenWireCodec", "OpenWireError", "negotiate", "wire_format_info"]
