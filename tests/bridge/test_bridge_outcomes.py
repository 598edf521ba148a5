"""What the bridge does with each outcome a remote gives, against a scripted remote (a Proton
Container acceptor on loopback): `released` comes back later unchanged, `modified` with
delivery-failed is retried too, never counted nor dead-lettered, and nothing leaves the local
queue before `accepted`."""
from __future__ import annotations

import threading

from proton import Delivery
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

from bridge_testing import bridge_row, bridged_queue_config, free_port, numbered, queue_row, send_all
from hermod_testing import wait_for


class ScriptedRemote(MessagingHandler):
    """Settles each arriving message with the next outcome `script(n, attempt)` names."""

    def __init__(self, port: int, script):
        super().__init__(auto_accept=False)
        self.port, self.script = port, script
        self.seen: list[tuple[int, str]] = []  # (n, outcome) in arrival order
        self.injector = EventInjector()
        self.container = Container(self)
        self.container.selectable(self.injector)
        self.thread = threading.Thread(target=self.container.run, daemon=True)

    def on_start(self, event):
        self.acceptor = event.container.listen(f"127.0.0.1:{self.port}")

    def on_message(self, event):
        n = event.message.properties["n"]
        outcome = self.script(n, sum(1 for m, _ in self.seen if m == n))
        self.seen.append((n, outcome))
        d = event.delivery
        if outcome == "accepted":
            self.accept(d)
        elif outcome == "released":
            self.release(d, delivered=False)
        elif outcome == "failed":
            d.local.failed = True
            d.update(Delivery.MODIFIED)
            d.settle()

    def on_stop_remote(self, event):
        self.acceptor.close()
        self.injector.close()
        self.container.stop()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.injector.trigger(ApplicationEvent("stop_remote"))
        self.thread.join(10)
        assert not self.thread.is_alive(), "the scripted remote did not stop"

    def outcomes(self, n: int) -> list[str]:
        return [o for m, o in list(self.seen) if m == n]


def test_released_comes_back_later_and_nothing_leaves_before_accepted(run_broker):
    port = free_port()

    def script(n, attempt):
        return "released" if n == 1 and attempt < 2 else "accepted"

    with ScriptedRemote(port, script) as remote:
        local = run_broker("local", bridged_queue_config(f"amqp://127.0.0.1:{port}"))
        assert send_all(local.url, "outbound", numbered(3)) == 3
        wait_for(lambda: remote.outcomes(1) == ["released", "released", "accepted"], timeout=20,
                 message="message 1 released twice, then accepted")
        wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="queue empty")
        assert remote.outcomes(0) == ["accepted"] and remote.outcomes(2) == ["accepted"]
        row = queue_row(local.url, "outbound")
        assert (row["added"], row["acked"]) == (3, 3)
        assert bridge_row(local.url)["forwarded"] == 3


def test_modified_is_retried_uncounted_and_never_dead_lettered(run_broker):
    """`modified` (even delivery-failed) is the remote's trouble, not the message's: retried
    with back-off, no delivery attempt counted, never dead-lettered (max_delivery_attempts 2)."""
    port = free_port()
    dla = ('[[address_settings]]\nmatch = "#"\ndead_letter_address = "DLQ"\nmax_delivery_attempts = 2\n'
           '[[address]]\nname = "DLQ"\n  [[address.queue]]\n  name = "DLQ"\n')

    def script(n, attempt):
        return "failed" if n == 0 and attempt < 3 else "accepted"

    with ScriptedRemote(port, script) as remote:
        local = run_broker("local", bridged_queue_config(f"amqp://127.0.0.1:{port}", extra=dla))
        assert send_all(local.url, "outbound", numbered(2)) == 2
        wait_for(lambda: remote.outcomes(0) == ["failed"] * 3 + ["accepted"], timeout=20,
                 message="message 0 modified three times, then accepted")
        wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="queue empty")
        assert remote.outcomes(1) == ["accepted"]
        assert queue_row(local.url, "DLQ")["messages"] == 0
        assert bridge_row(local.url)["forwarded"] == 2


class SilentAttach(ScriptedRemote):
    """Opens the connection and sessions, never answers an attach (and heartbeats meanwhile,
    so no idle timeout ends it)."""

    def __init__(self, port: int):
        super().__init__(port, lambda n, attempt: "accepted")
        self.handlers = []  # none of MessagingHandler's automatic opens

    def on_connection_remote_open(self, event):
        event.connection.open()

    def on_session_remote_open(self, event):
        event.session.open()


def test_a_remote_that_never_answers_the_attach_is_given_up_on(run_broker):
    port = free_port()
    with SilentAttach(port):
        local = run_broker("local", bridged_queue_config(f"amqp://127.0.0.1:{port}",
                                                         extra="[server]\nidle_timeout_s = 1\n"))
        wait_for(lambda: "did not open" in bridge_row(local.url)["last_error"], timeout=20,
                 message="the bridge gives up on the unanswered attach")
        assert bridge_row(local.url)["state"] in ("backoff", "connecting")
