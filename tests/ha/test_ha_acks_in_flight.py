"""Shared-store HA takeover with acknowledgements in flight (issue 28, item 7): a consumer
acknowledges steadily while the live broker is SIGKILLed. After the backup takes over, no
acknowledgement the broker had confirmed (a later round trip on the consumer's connection was
answered: the contract's "Delivery guarantees") comes back, at most the unconfirmed window of
acknowledgements does, and every accepted message is either acknowledged or delivered again."""
from __future__ import annotations

import signal
import threading

from proton import ConnectionException, Message, Timeout
from proton.utils import BlockingConnection, LinkDetached, SendException

from ha_testing import BACKUP, LEASE_S, QUEUE, drain, failover_urls, probe, send_durable
from hermod_testing import wait_for

RECOVERY_S = 15
PING_EVERY = 5  # acknowledgements between two answered round trips: the in-flight window


class AckingConsumer(threading.Thread):
    """Receives and accepts one message at a time; every PING_EVERY acknowledgements a durable
    send on the same connection is answered, which the broker does only once the earlier
    acknowledgements are stored: those are `confirmed`."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.acked: list[str] = []
        self.confirmed: set[str] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            connection = BlockingConnection(self.url, timeout=10)
            receiver = connection.create_receiver(QUEUE, credit=10)
            pinger = connection.create_sender("pings")
            pending: list[str] = []
            while True:
                message = receiver.receive(timeout=10)
                receiver.accept()
                self.acked.append(message.body)
                pending.append(message.body)
                if len(pending) == PING_EVERY:
                    pinger.send(Message(body="ping", durable=True))
                    self.confirmed.update(pending)
                    pending = []
        except (ConnectionException, SendException, LinkDetached, Timeout) as error:
            self.error = error


def test_acknowledgements_in_flight_at_a_sigkill_are_not_lost_nor_confirmed_ones_redelivered(ha_db, nodes):
    _cluster, _database, url = ha_db
    live = nodes("node-a", url)
    live_url = live.wait_ready()
    backup = nodes("node-b", url)
    backup.wait_line(BACKUP, 20)
    failover = wait_for(lambda: failover_urls(probe(live_url).properties or {}), 10,
                        message="node-b in node-a's failover-server-list")[0]
    accepted = send_durable(live_url, [f"m-{n}" for n in range(400)])
    assert len(accepted) == 400
    consumer = AckingConsumer(live_url)
    consumer.start()
    wait_for(lambda: len(consumer.confirmed) >= 60, 30, message="60 acknowledgements confirmed")

    live.signal(signal.SIGKILL)  # mid-stream: acknowledgements and a ping are on their way
    consumer.join(30)
    assert consumer.error is not None, "the consumer kept going after the kill"
    backup.wait_ready(LEASE_S + RECOVERY_S)

    got = drain(failover)
    acked, confirmed = set(consumer.acked), consumer.confirmed
    assert len(got) == len(set(got)), "a message came twice after the takeover"
    assert not set(got) & confirmed, "a confirmed acknowledgement was undone by the takeover"
    redelivered = set(got) & acked
    assert len(redelivered) <= PING_EVERY, f"{len(redelivered)} acknowledged messages came back"
    assert set(accepted) - acked <= set(got), "an accepted, unacknowledged message was lost"
    assert set(got) <= set(accepted)
