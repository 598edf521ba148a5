"""The protocol adapters other than AMQP's (OpenWire, STOMP, MQTT): each turns its wire protocol
into the core's operations (publish, attach a consumer, acknowledge) through the same ports as the
AMQP adapter, with the one authorization decision. `connection.py` is what they share."""
