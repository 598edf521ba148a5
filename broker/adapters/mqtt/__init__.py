"""The MQTT 3.1, 3.1.1 and 5.0 adapter: connections (connection.py) driving the sans-IO codec
(broker/mqtt), sessions and their takeover (sessions.py), subscriptions as core consumers
(subscriptions.py), the outbound delivery window (delivery.py), retained messages
(retained.py), wills (will.py) and the refusal table (refusals.py)."""
