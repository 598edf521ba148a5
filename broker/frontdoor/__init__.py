"""The front door every listener shares: protocol detection from the first bytes, then the
connection is handed to that protocol's adapter (AMQP, OpenWire, STOMP, MQTT)."""
