"""Fidelity client on python-qpid-proton: the project's 0.40 (venv) or Debian's 0.37 (/usr/bin/python3).

    python pyclient.py send    --url URL --address A --spec SPEC.jsonl --sent SENT.bin
    python pyclient.py receive --url URL --address A --count N --output OUT.bin

send: each line of SPEC is {"n": i, "sections": [[code, typed JSON], ...]} (canon.py); the message
is built with Proton's `Data` codec section by section, sent as one delivery, and the bytes sent
are appended to SENT (4-byte big-endian length, then the bytes).
receive: grants N credits, writes the raw bytes of each delivery to OUTPUT the same way, accepts.
Prints one JSON line per event on stdout ({"event": "sent"/"settled"/"message"/"summary"/"error"}).
Exit 0 done, 1 a message was not accepted, 2 an AMQP error, 3 timed out.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import canon  # noqa: E402
from cli import arguments  # noqa: E402
from proton import Delivery  # noqa: E402
from proton.handlers import MessagingHandler  # noqa: E402
from proton.reactor import Container  # noqa: E402


def _tag_number(tag) -> int:
    """Delivery tags read back as bytes on Proton 0.37 and as str on 0.40."""
    return int(tag.decode() if isinstance(tag, bytes) else tag)


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


class _Client(MessagingHandler):
    def __init__(self, args):
        super().__init__(prefetch=0, auto_accept=False)
        self.args = args
        self.rc = 0
        self.timer = None

    def on_start(self, event):
        self.conn = event.container.connect(self.args.url, sasl_enabled=True, allow_insecure_mechs=True)
        self.timer = event.container.schedule(self.args.timeout, self)
        self.open_link(event.container)

    def on_timer_task(self, event):
        emit(event="timeout", seconds=self.args.timeout)
        self.rc = 3
        self.conn.close()

    def finish(self):
        if self.timer:
            self.timer.cancel()
        self.conn.close()

    def on_link_error(self, event):
        self._error("link", event.link.remote_condition)

    def on_connection_error(self, event):
        self._error("connection", event.connection.remote_condition)

    def on_transport_error(self, event):
        self._error("transport", event.transport.condition)

    def _error(self, where, cond):
        emit(event="error", where=where, condition=cond and cond.name, description=cond and cond.description)
        self.rc = 2
        self.conn.close()


class Sender(_Client):
    def open_link(self, container):
        self.specs = [json.loads(line) for line in Path(self.args.spec).read_text().splitlines() if line.strip()]
        self.next = 0
        self.settled = 0
        self.sent_file = open(self.args.sent, "wb")
        container.create_sender(self.conn, self.args.address)

    def on_sendable(self, event):
        link = event.sender
        while link.credit > 0 and self.next < len(self.specs):
            spec = self.specs[self.next]
            body = canon.encode_message(spec["sections"])
            link.delivery(str(spec["n"]))
            link.stream(body)
            link.advance()
            self.sent_file.write(len(body).to_bytes(4, "big") + body)
            emit(event="sent", n=spec["n"], size=len(body))
            self.next += 1
        if self.next == len(self.specs):
            self.sent_file.close()

    def on_accepted(self, event):
        self._outcome(event, "accepted")

    def on_rejected(self, event):
        self._outcome(event, "rejected")

    def on_released(self, event):
        self._outcome(event, "modified" if event.delivery.remote_state == Delivery.MODIFIED else "released")

    def _outcome(self, event, state):
        emit(event="settled", n=_tag_number(event.delivery.tag), state=state)
        if state != "accepted":
            self.rc = 1
        self.settled += 1
        if self.settled == len(self.specs):
            emit(event="summary", sent=self.settled)
            self.finish()


class Receiver(_Client):
    """Reads each delivery's raw bytes itself (Proton's own message decoding is left out)."""

    def __init__(self, args):
        super().__init__(args)
        self.handlers = [h for h in self.handlers if type(h).__name__ != "IncomingMessageHandler"]

    def open_link(self, container):
        self.got = 0
        self.out = open(self.args.output, "wb")
        self.link = container.create_receiver(self.conn, self.args.address)
        if self.args.count:
            self.link.flow(self.args.count)

    def on_delivery(self, event):
        dlv = event.delivery
        if dlv.partial or not dlv.readable:
            return
        data = dlv.link.recv(dlv.pending)
        self.out.write(len(data).to_bytes(4, "big") + data)
        self.out.flush()
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        emit(event="message", n=self.got, size=len(data), raw=True)
        self.got += 1
        if self.got == self.args.count:
            self.out.close()
            emit(event="summary", received=self.got)
            self.finish()


def main(argv=None) -> int:
    args = arguments(__doc__.splitlines()[0], argv)
    handler = (Sender if args.mode == "send" else Receiver)(args)
    Container(handler).run()
    return handler.rc


if __name__ == "__main__":
    sys.exit(main())
