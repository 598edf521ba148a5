"""The STOMP 1.0/1.1/1.2 adapter: a client connection (connection.py) drives the sans-IO codec
(`broker.stomp`) and turns frames into the core's operations: SEND into `core.publishing`
(producer.py), SUBSCRIBE/ACK/NACK into consumers on queues (subscriptions.py, subscription.py),
BEGIN/COMMIT/ABORT into `core.transactions` (transactions.py), `/temp-queue/` and `/temp-topic/`
into the connection's temporary destinations (temporaries.py). Core errors become ERROR frames
in one table (refusals.py); answers keep the order of the frames they answer (answers.py);
heart-beats (heartbeats.py) drop a client whose beats stop."""
