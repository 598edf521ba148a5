"""The STOMP entry paths of the permission matrix: SEND to a destination (existing, or created by
the send), SUBSCRIBE taking from a queue, a browser (`browser: true`), a durable subscription
(created by SUBSCRIBE, removed by UNSUBSCRIBE with its name). A refusal is an ERROR frame whose
`message` starts with "not authorized" and names the operation and the address (checked here),
then the connection closes. Clients: the tests' raw STOMP socket client, logged in per user."""
from __future__ import annotations

import sys
from pathlib import Path

from hermod_testing import wait_for
from matrix_core import ALL, USERS, Case, EntryPath, Outcome, Wire, allowed, anycast_address, denied, multicast_address

_STOMP_TESTS = Path(__file__).resolve().parent.parent / "stomp"
if str(_STOMP_TESTS) not in sys.path:
    sys.path.insert(0, str(_STOMP_TESTS))

from stomp_clients import Raw  # noqa: E402

CREATE = frozenset({"create_address", "create_durable_queue"})
REFUSED = "not authorized"


def login(wire: Wire, user: str, extra=()) -> Raw:
    raw = Raw(wire.broker)
    frame = raw.connect("1.2", user, USERS[user], extra=extra)
    assert frame.command == "CONNECTED", frame
    return raw


def answer(raw: Raw, command: str, headers, body: bytes = b"") -> object:
    """Send a frame asking for a receipt: the RECEIPT, or the ERROR refusing it (a body goes
    without content-length: a text message)."""
    raw.frame(command, [*headers, ("receipt", "r")], body, length=False)
    while True:
        frame = raw.next()
        if frame.command in ("RECEIPT", "ERROR"):
            return frame


def refused(frame, case: Case, nothing_changed: bool) -> Outcome:
    """A denial seen on the wire: the ERROR's message must name the operation and the address."""
    message = frame.header("message") or ""
    named = case.operation in message and case.address in message
    return denied(REFUSED if message.startswith(REFUSED) else message, nothing_changed and named, message)


class StompSend(EntryPath):
    """SEND to `/queue/A` or `/topic/A` (an existing address), or to a new `/queue/A` that the send
    creates (`create_address`, and the durable anycast queue with it)."""
    protocol = "stomp"
    denials = (REFUSED,)

    def __init__(self, name: str, form: str, multicast: bool = False, operations=("send",)):
        self.name, self.form, self.multicast, self.operations = name, form, multicast, operations

    def needs(self, operation):
        return frozenset({operation, "send"}) | (CREATE if operation in CREATE else frozenset())

    def toml(self, case):
        if case.operation != "send":
            return ""
        return multicast_address(case.address, f"{case.address}.sub") if self.multicast else anycast_address(case.address)

    def attempt(self, wire, case):
        raw = login(wire, case.user)
        try:
            frame = answer(raw, "SEND", [("destination", self.form.format(case.address))], case.tag.encode())
        finally:
            raw.close()
        if frame.command == "ERROR":
            if case.operation == "send":
                queue = f"{case.address}.sub" if self.multicast else case.address
                return refused(frame, case, wire.messages(queue) == 0)
            return refused(frame, case, case.address not in wire.addresses())
        if self.multicast:
            return allowed("RECEIPT", wire.take(f"{case.address}::{case.address}.sub", 1) == [case.tag])
        return allowed("RECEIPT", wire.take(case.address, 1) == [case.tag])


class StompConsume(EntryPath):
    """SUBSCRIBE to `/queue/A` holding a message the admin put there: `consume` takes it; refused,
    it stays."""
    protocol = "stomp"
    denials = (REFUSED,)
    name = "stomp-subscribe-queue"
    operations = ("consume",)

    def toml(self, case):
        return anycast_address(case.address)

    def attempt(self, wire, case):
        wire.send(case.address, case.tag)
        raw = login(wire, case.user)
        try:
            frame = answer(raw, "SUBSCRIBE", [("destination", f"/queue/{case.address}"), ("id", "s")])
            if frame.command == "ERROR":
                return refused(frame, case, wire.messages(case.address) == 1)
            message = raw.until("MESSAGE")
        finally:
            raw.close()
        return allowed("MESSAGE", message.body == case.tag.encode())


class StompBrowse(EntryPath):
    """`browser: true` on `/queue/A`: `browse` alone sees the message and leaves it."""
    protocol = "stomp"
    denials = (REFUSED,)
    name = "stomp-browser"
    operations = ("browse",)

    def entries(self, operation, index):
        p = self.prefix(index)
        return [(f"{p}.#", {"may": frozenset({"browse"}), "maynot": ALL - {"browse"}})]

    def toml(self, case):
        return anycast_address(case.address)

    def attempt(self, wire, case):
        wire.send(case.address, case.tag)
        raw = login(wire, case.user)
        try:
            frame = answer(raw, "SUBSCRIBE", [("destination", f"/queue/{case.address}"), ("id", "b"),
                                              ("browser", "true")])
            if frame.command == "ERROR":
                return refused(frame, case, wire.messages(case.address) == 1)
            message = raw.until("MESSAGE")
        finally:
            raw.close()
        wait_for(lambda: wire.messages(case.address) == 1, message="the browsed message stays")
        return allowed("MESSAGE", message.body == case.tag.encode())


class StompDurable(EntryPath):
    """A durable subscription (`client-id` + `activemq.subscriptionName`): SUBSCRIBE creates its
    queue (`create_durable_queue`); UNSUBSCRIBE naming it deletes it (`delete_queue`; refused,
    the subscription stays)."""
    protocol = "stomp"
    denials = (REFUSED,)
    name = "stomp-durable-subscription"
    operations = ("create_durable_queue", "delete_queue")

    def needs(self, operation):
        return frozenset({operation, "consume", "create_durable_queue"})

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        raw = login(wire, case.user, extra=[("client-id", f"pm-stomp-{case.id}")])
        try:
            headers = [("destination", f"/topic/{case.address}"), ("id", "d"), ("activemq.subscriptionName", "sub")]
            frame = answer(raw, "SUBSCRIBE", headers)
            if frame.command == "ERROR":
                return refused(frame, case, wire.queues_on(case.address) == [])
            durable = [q for q in wire.queues_on(case.address) if q["durable"]]
            if case.operation == "create_durable_queue":
                return allowed("RECEIPT", len(durable) == 1)
            frame = answer(raw, "UNSUBSCRIBE", [("id", "d"), ("activemq.subscriptionName", "sub")])
        finally:
            raw.close()
        if frame.command == "ERROR":
            return refused(frame, case, len(wire.queues_on(case.address)) == 1)
        wait_for(lambda: wire.queues_on(case.address) == [], message="the subscription's queue deleted")
        return allowed("RECEIPT", True)


PATHS: list[EntryPath] = [
    StompSend("stomp-send-queue", "/queue/{}"),
    StompSend("stomp-send-topic", "/topic/{}", multicast=True),
    StompSend("stomp-send-creates", "/queue/{}", operations=("create_address", "create_durable_queue")),
    StompConsume(),
    StompBrowse(),
    StompDurable(),
]
