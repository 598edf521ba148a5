"""STOMP comparison scenarios over a bare socket (exact frames out, every frame in), each giving a
normalized transcript so that ActiveMQ Classic 5.17.2's STOMP transport and Hermod can be compared
line for line (test_stomp_transcripts.py). Classic's transcripts are committed in
tests/stomp/classic_transcripts/.

Normalized: `message-id` and `ack` values made by the broker become `#n` in order of first
appearance; `timestamp` and `expires` print as `set` or `0`; ERROR frames print only that they
came and whether the connection closed after them (the wording is the broker's own); headers
print sorted, without `content-length` (the body prints exactly; the contract puts the header on
every MESSAGE, Classic only on bytes messages) and CONNECTED's broker-naming ones.

Where the contract departs from Classic on purpose, `contract_view` turns Classic's line into
what the contract asks: an ERROR always closes the connection (Classic keeps it open after a
refused SEND or ACK)."""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Callable

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "stomp" / "classic_transcripts"
WAIT, NONE = 10.0, 1.0
BROKER_MADE = ("message-id", "ack")
TIMES = ("timestamp", "expires")
SKIP = ("server", "session", "heart-beat", "content-length")


class Wire:
    """One STOMP connection and the transcript it writes."""

    def __init__(self, port: int, out: list[str], tokens: dict[str, str]):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.buf = b""
        self.out, self.tokens = out, tokens
        self.closed = False

    def send(self, command: str, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        lines = [command, *(f"{k}:{v}" for k, v in (headers or {}).items())]
        self.sock.sendall("\n".join(lines).encode() + b"\n\n" + body + b"\0")

    def frame(self, timeout: float = WAIT) -> tuple[str, dict[str, str], bytes] | None:
        """The next frame (heart-beat newlines skipped), or None: nothing in `timeout`, or closed."""
        deadline = time.monotonic() + timeout
        while True:
            self.buf = self.buf.lstrip(b"\r\n")
            head_end = self.buf.find(b"\n\n")
            if head_end >= 0:
                head = self.buf[:head_end].decode()
                command, *lines = head.split("\n")
                headers: dict[str, str] = {}
                for line in lines:
                    k, _, v = line.partition(":")
                    headers.setdefault(k, v)
                start = head_end + 2
                if "content-length" in headers:
                    end = start + int(headers["content-length"])
                    if len(self.buf) > end:
                        body, self.buf = self.buf[start:end], self.buf[end + 1:]
                        return command, headers, body
                else:
                    nul = self.buf.find(b"\0", start)
                    if nul >= 0:
                        body, self.buf = self.buf[start:nul], self.buf[nul + 1:]
                        return command, headers, body
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
            self.buf += chunk

    def token(self, value: str) -> str:
        return self.tokens.setdefault(value, f"#{len(self.tokens) + 1}")

    def show(self, label: str, timeout: float = WAIT) -> dict[str, str] | None:
        """Read one frame and write its line; its raw headers (None: nothing came)."""
        got = self.frame(timeout)
        if got is None:
            self.out.append(f"{label} {'closed' if self.closed else 'none'}")
            return None
        command, headers, body = got
        if command == "ERROR":
            after = self.frame(NONE)
            self.out.append(f"{label} ERROR then {'closed' if self.closed and after is None else 'open'}")
            return headers
        shown = []
        for k in sorted(headers):
            v = headers[k]
            if k in SKIP:
                continue
            if k in BROKER_MADE:
                v = self.token(v)
            elif k in TIMES:
                v = "set" if v not in ("", "0") else "0"
            shown.append(f"{k}={v}")
        self.out.append(f"{label} {command} {' '.join(shown)} body={body!r}")
        return headers

    def close(self) -> None:
        self.sock.close()


def connect(port: int, out: list[str], tokens: dict[str, str], version: str = "1.2",
            extra: dict[str, str] | None = None) -> Wire:
    w = Wire(port, out, tokens)
    w.send("CONNECT", {"accept-version": version, "host": "localhost", "login": "", "passcode": "", **(extra or {})})
    w.show("connected")
    return w


# -- the scenarios -------------------------------------------------------------------------------


def receipts_and_acks(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """SEND with receipts; SUBSCRIBE client-individual; ACK one, disconnect: the other comes
    back to the next subscriber."""
    w = connect(port, out, tokens)
    for i in (1, 2):
        w.send("SEND", {"destination": "/queue/scn.acks", "receipt": f"r{i}", "persistent": "true",
                        "color": "red", "content-type": "text/plain"}, f"m{i}".encode())
        w.show("send")
    w.send("SUBSCRIBE", {"destination": "/queue/scn.acks", "id": "s1", "ack": "client-individual", "receipt": "sub"})
    w.show("subscribe")
    first = w.show("msg")
    w.show("msg")
    assert first is not None
    w.send("ACK", {"id": first["ack"], "receipt": "ack"})
    w.show("ack")
    w.send("DISCONNECT", {"receipt": "bye"})
    w.show("disconnect")
    w.close()
    w = connect(port, out, tokens)
    w.send("SUBSCRIBE", {"destination": "/queue/scn.acks", "id": "s2", "ack": "auto"})
    w.show("again")
    w.show("again", NONE)
    w.close()


def selector_and_topics(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """A selector on a queue subscription; two topic subscribers; a topic message sent before
    anyone subscribed is gone."""
    w = connect(port, out, tokens)
    w.send("SEND", {"destination": "/topic/scn.news", "receipt": "early"}, b"early")
    w.show("send")
    for i, color in enumerate(("red", "blue", "red")):
        w.send("SEND", {"destination": "/queue/scn.sel", "color": color, "n": str(i), "receipt": f"q{i}"}, color.encode())
        w.show("send")
    w.send("SUBSCRIBE", {"destination": "/queue/scn.sel", "id": "red", "selector": "color = 'red' AND n > 0"})
    w.show("red")
    w.show("red", NONE)
    w.send("UNSUBSCRIBE", {"id": "red", "receipt": "unsub"})
    w.show("unsubscribe")
    w.send("SUBSCRIBE", {"destination": "/topic/scn.news", "id": "t1", "receipt": "t1"})
    w.show("subscribe")
    w.send("SUBSCRIBE", {"destination": "/topic/scn.news", "id": "t2", "receipt": "t2"})
    w.show("subscribe")
    w.send("SEND", {"destination": "/topic/scn.news"}, b"late")
    w.show("topic")
    w.show("topic")
    w.show("topic", NONE)
    w.close()


def transactions(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """BEGIN/ABORT drops the sends; BEGIN/COMMIT delivers them; an ACK in an aborted transaction
    is undone."""
    w = connect(port, out, tokens)
    w.send("BEGIN", {"transaction": "tx1"})
    w.send("SEND", {"destination": "/queue/scn.tx", "transaction": "tx1"}, b"aborted")
    w.send("ABORT", {"transaction": "tx1", "receipt": "abort"})
    w.show("abort")
    w.send("BEGIN", {"transaction": "tx2"})
    w.send("SEND", {"destination": "/queue/scn.tx", "transaction": "tx2"}, b"committed")
    w.send("COMMIT", {"transaction": "tx2", "receipt": "commit"})
    w.show("commit")
    w.send("SUBSCRIBE", {"destination": "/queue/scn.tx", "id": "s1", "ack": "client"})
    msg = w.show("msg")
    w.show("msg", NONE)
    assert msg is not None
    w.send("BEGIN", {"transaction": "tx3"})
    w.send("ACK", {"id": msg["ack"], "transaction": "tx3"})
    w.send("ABORT", {"transaction": "tx3", "receipt": "abort-ack"})
    w.show("abort-ack")
    w.close()
    w = connect(port, out, tokens)
    w.send("SUBSCRIBE", {"destination": "/queue/scn.tx", "id": "s2"})
    w.show("again")
    w.close()


def bodies_and_headers(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """content-length bodies with NUL bytes, a body without content-length, escaped headers
    (1.2), an empty body."""
    w = connect(port, out, tokens)
    w.send("SEND", {"destination": "/queue/scn.bodies", "content-length": "5"}, b"a\0b\0c")
    w.send("SEND", {"destination": "/queue/scn.bodies"}, "plain \u00e9".encode())
    w.send("SEND", {"destination": "/queue/scn.bodies", "odd\\cname": "line1\\nline2\\\\end"}, b"escaped")
    w.send("SEND", {"destination": "/queue/scn.bodies", "receipt": "last"}, b"")
    w.show("send")
    w.send("SUBSCRIBE", {"destination": "/queue/scn.bodies", "id": "s1"})
    for _ in range(4):
        w.show("msg")
    w.close()


def errors(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """Bad frames: an unknown command; a SEND with no destination; (each on a connection of its
    own) what comes back and whether the connection stays."""
    w = connect(port, out, tokens)
    w.send("FROB", {"receipt": "x"})
    w.show("unknown-command")
    w.close()
    w = connect(port, out, tokens)
    w.send("SEND", {"receipt": "y"}, b"nowhere")
    w.show("send-without-destination")
    w.close()
    w = connect(port, out, tokens)
    w.send("ACK", {"id": "no-such-ack", "receipt": "z"})
    w.show("ack-unknown")
    w.close()


def durable(port: int, out: list[str], tokens: dict[str, str]) -> None:
    """A durable topic subscription (client-id + activemq.subscriptionName) keeps what is sent
    while its connection is away."""
    w = connect(port, out, tokens, extra={"client-id": "scn-stomp"})
    w.send("SUBSCRIBE", {"destination": "/topic/scn.durable", "id": "d1", "activemq.subscriptionName": "sub1",
                         "receipt": "sub"})
    w.show("subscribe")
    w.send("DISCONNECT", {"receipt": "bye"})
    w.show("disconnect")
    w.close()
    p = connect(port, out, tokens)
    p.send("SEND", {"destination": "/topic/scn.durable", "persistent": "true", "receipt": "d"}, b"while away")
    p.show("send")
    p.close()
    w = connect(port, out, tokens, extra={"client-id": "scn-stomp"})
    w.send("SUBSCRIBE", {"destination": "/topic/scn.durable", "id": "d1", "activemq.subscriptionName": "sub1"})
    w.show("resumed")
    w.show("resumed", NONE)
    w.close()


SCENARIOS: dict[str, Callable[[int, list[str], dict[str, str]], None]] = {
    "receipts-and-acks": receipts_and_acks, "selector-and-topics": selector_and_topics,
    "transactions": transactions, "bodies-and-headers": bodies_and_headers, "errors": errors, "durable": durable,
}


def contract_view(line: str) -> str:
    """Classic's transcript line as the contract wants it (see the module docstring)."""
    return line.replace(" ERROR then open", " ERROR then closed")


def run(port: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, scenario in SCENARIOS.items():
        lines: list[str] = []
        try:
            scenario(port, lines, {})
        except Exception as e:  # the transcript says where it stopped
            lines.append(f"exception {type(e).__name__}")
        out[name] = lines
    return out


def expected(name: str) -> list[str]:
    return (TRANSCRIPTS / f"{name}.txt").read_text().splitlines()


def write(transcripts: dict[str, list[str]]) -> None:
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    for name, lines in transcripts.items():
        (TRANSCRIPTS / f"{name}.txt").write_text("\n".join(lines) + "\n")
