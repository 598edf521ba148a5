"""Messages across protocols. The broker holds every message as encoded AMQP 1.0 sections (the
core's `Message.encoded`, what the store keeps); `neutral.py` is that form as plain values, the
protocol-neutral message each adapter maps its own to and from, following the contract's table
("Messages across protocols"), one module per protocol beside it."""
