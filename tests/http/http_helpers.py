"""HTTP test helpers: the broker's HTTP URL from its readiness output, and JSON requests with
the standard library."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from urllib.parse import quote

from proton import Message
from proton.utils import BlockingConnection

HTTP_READY = re.compile(r"hermod http on (https?://\S+)")
TIMEOUT = 10


def http_url(broker) -> str:
    for line in broker.stdout_lines:
        m = HTTP_READY.search(line)
        if m:
            return m.group(1)
    raise AssertionError("no 'hermod http on' line: " + "".join(broker.stdout_lines))


def call(base: str, method: str, path: str, body=None, raw: bytes | None = None,
         headers: dict | None = None) -> tuple[int, object]:
    """(status, decoded JSON answer or None); errors are answers, not exceptions."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            status, payload, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if not payload:
        return status, None
    return status, json.loads(payload) if "json" in ctype else payload.decode()


def q(name: str) -> str:
    return quote(name, safe="")


def send(url: str, address: str, *messages: Message) -> None:
    conn = BlockingConnection(url, timeout=TIMEOUT)
    try:
        sender = conn.create_sender(address)
        for m in messages:
            sender.send(m)
    finally:
        conn.close()


def receive_all(url: str, address: str, expected: int) -> list[Message]:
    conn = BlockingConnection(url, timeout=TIMEOUT)
    try:
        receiver = conn.create_receiver(address, credit=expected + 10)
        got = []
        for _ in range(expected):
            got.append(receiver.receive(timeout=TIMEOUT))
            receiver.accept()
        return got
    finally:
        conn.close()
