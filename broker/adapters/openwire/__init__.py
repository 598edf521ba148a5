"""The OpenWire adapter: ActiveMQ Classic's JMS clients on the broker's address model."""
