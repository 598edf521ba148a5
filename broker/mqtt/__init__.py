"""MQTT 3.1, 3.1.1 and 5.0: a sans-IO packet codec (no sockets, no broker) for the MQTT adapter.

`reader.PacketReader` turns arriving bytes into packets (the remaining length and the maximum
packet size checked before a body is kept); `codec.encode` / `codec.decode` turn packets
(`packets`) into bytes and back; `properties` holds the MQTT 5 properties; `topics` validates
topic names and filters and maps them to Hermod addresses. Every fault is an `MqttError` carrying
the MQTT 5 reason code to answer with.
"""

from .codec import UnsupportedProtocol, decode, encode, refusal_for_level
from .errors import MqttError
from .packets import (MQTT_3_1, MQTT_3_1_1, MQTT_5, Auth, ConnAck, Connect, Disconnect, Packet, PingReq,
                      PingResp, PubAck, PubComp, Publish, PubRec, PubRel, SubAck, Subscribe, Subscription,
                      UnsubAck, Unsubscribe, Will)
from .properties import Properties
from .reader import PacketReader

__all__ = ["MQTT_3_1", "MQTT_3_1_1", "MQTT_5", "Auth", "ConnAck", "Connect", "Disconnect", "MqttError", "Packet",
           "PacketReader", "PingReq", "PingResp", "Properties", "PubAck", "PubComp", "PubRec", "PubRel", "Publish",
           "SubAck", "Subscribe", "Subscription", "UnsubAck", "Unsubscribe", "UnsupportedProtocol", "Will",
           "decode", "encode", "refusal_for_level"]
