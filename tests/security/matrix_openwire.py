"""The OpenWire entry paths of the permission matrix: the ActiveMQ Classic JMS client (Debian's
libactivemq-java, tests/openwire/owclient.py) sending, consuming, browsing, auto-creating and
subscribing durably as `case.user`; a refusal is the JMSSecurityException the client raises
from the broker's ExceptionResponse (contract, "Other protocols": the same permissions apply to
every protocol)."""
from __future__ import annotations

import sys
from pathlib import Path

from matrix_core import ALL, USERS, Case, EntryPath, Outcome, Wire, allowed, anycast_address, denied, multicast_address

sys.path.insert(0, str(Path(__file__).parent.parent / "openwire"))
from owclient import JmsError, OwClient, q  # noqa: E402

SECURITY = "javax.jms.JMSSecurityException"
CREATE = frozenset({"create_address", "create_durable_queue"})


def client(wire: Wire, user: str, client_id: str | None = None) -> OwClient:
    c = OwClient(int(wire.address.rsplit(":", 1)[1]))
    c.connect(user=user, password=USERS[user], client_id=client_id)
    c("session", "s", "false", "auto")
    return c


class OpenWirePath(EntryPath):
    protocol = "openwire"
    denials = (SECURITY,)
    names_denial = False  # the refusal is a JMS exception, not an AMQP condition


class Producer(OpenWirePath):
    """A producer on `queue:ADDRESS` (or `topic:`): `send` to an existing address, the create
    rights for a new one. Persistent sends: each is answered, so a refusal reaches the client."""

    def __init__(self, name: str, kind: str, operations=("send",)):
        self.name, self.kind, self.operations = name, kind, operations

    def needs(self, operation):
        return frozenset({operation, "send"}) | (CREATE if operation in CREATE else frozenset())

    def toml(self, case):
        if case.operation != "send":
            return ""
        return multicast_address(case.address, f"{case.address}.sub") if self.kind == "topic" \
            else anycast_address(case.address)

    def attempt(self, wire: Wire, case: Case) -> Outcome:
        c = client(wire, case.user)
        try:
            try:
                c("producer", "p", "s", f"{self.kind}:{q(case.address)}", "persistent")
                c("send", "p", "text", q(case.tag))
            except JmsError as e:
                if case.operation == "send":
                    nothing = wire.messages(f"{case.address}.sub" if self.kind == "topic" else case.address) == 0
                else:
                    nothing = case.address not in wire.addresses()
                return denied(e.java_class, nothing, e.message)
        finally:
            c.close()
        if self.kind == "topic" and case.operation == "send":
            return allowed("sent", wire.take(f"{case.address}::{case.address}.sub", 1) == [case.tag])
        if self.kind == "topic":
            return allowed("sent", case.address in wire.addresses())
        return allowed("sent", wire.take(case.address, 1) == [case.tag])


class CompositeProducer(OpenWirePath):
    """`open,ADDRESS`: each part is checked; a forbidden part refuses the send, nothing goes
    to the permitted part either."""
    name = "openwire-producer-composite"
    operations = ("send",)

    def toml(self, case):
        return anycast_address(case.address) + anycast_address(case.open_address)

    def attempt(self, wire, case):
        c = client(wire, case.user)
        try:
            try:
                c("producer", "p", "s", f"queue:{q(case.open_address + ',' + case.address)}", "persistent")
                c("send", "p", "text", q(case.tag))
            except JmsError as e:
                return denied(e.java_class, wire.messages(case.open_address) == 0 and wire.messages(case.address) == 0,
                              e.message)
        finally:
            c.close()
        return allowed("sent", wire.take(case.address, 1) == [case.tag] and
                       wire.take(case.open_address, 1) == [case.tag])


class Consumer(OpenWirePath):
    """A consumer of `queue:ADDRESS` (the admin's message waits there) or `topic:ADDRESS` (the
    admin sends after it subscribed)."""

    def __init__(self, name: str, kind: str, operations=("consume",)):
        self.name, self.kind, self.operations = name, kind, operations

    def needs(self, operation):
        return frozenset({operation, "consume"}) | (CREATE if operation in CREATE else frozenset())

    def toml(self, case):
        if case.operation != "consume":
            return ""
        return multicast_address(case.address) if self.kind == "topic" else anycast_address(case.address)

    def attempt(self, wire, case):
        preload = case.operation == "consume" and self.kind == "queue"
        if preload:
            wire.send(case.address, case.tag)
        c = client(wire, case.user)
        try:
            try:
                c("consumer", "c", "s", f"{self.kind}:{q(case.address)}")
            except JmsError as e:
                if preload:
                    return denied(e.java_class, wire.messages(case.address) == 1, e.message)
                if case.operation == "create_address":
                    return denied(e.java_class, case.address not in wire.addresses(), e.message)
                return denied(e.java_class, case.operation == "consume" or wire.queues_on(case.address) == [],
                              e.message)
            if self.kind == "topic":
                wire.send(f"topic://{case.address}", case.tag)
            elif not preload:
                wire.send(case.address, case.tag)
            m = c.receive("c", 10000)
        finally:
            c.close()
        return allowed("consumed", m is not None and m["body"] == case.tag)


class Browser(OpenWirePath):
    """A QueueBrowser: `browse` alone lets it see the message, which stays."""
    name = "openwire-browser"
    operations = ("browse",)

    def entries(self, operation, index):
        return [(f"{self.prefix(index)}.#", {"may": frozenset({"browse"}), "maynot": ALL - {"browse"}})]

    def toml(self, case):
        return anycast_address(case.address)

    def attempt(self, wire, case):
        if wire.messages(case.address) == 0:
            wire.send(case.address, case.tag)
        c = client(wire, case.user)
        try:
            try:
                seen = c("browse", "s", f"queue:{q(case.address)}")
            except JmsError as e:
                return denied(e.java_class, wire.messages(case.address) == 1, e.message)
        finally:
            c.close()
        return allowed("browsed", seen.split(" ")[0] == "1" and wire.messages(case.address) == 1)


class DurableSubscriber(OpenWirePath):
    """createDurableSubscriber: the subscription's queue `CLIENTID.NAME` needs
    `create_durable_queue` (and `consume`)."""
    name = "openwire-durable-subscription"
    operations = ("create_durable_queue",)

    def needs(self, operation):
        return frozenset({operation, "consume"})

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        c = client(wire, case.user, client_id=f"pm-ow-{case.index}-{case.user}")
        try:
            try:
                c("consumer", "d", "s", f"topic:{q(case.address)}", "durable=sub")
            except JmsError as e:
                return denied(e.java_class, wire.queues_on(case.address) == [], e.message)
        finally:
            c.close()
        durable = [row for row in wire.queues_on(case.address) if row["durable"]]
        return allowed("subscribed", len(durable) == 1)


PATHS: list[EntryPath] = [
    Producer("openwire-producer-queue", "queue", operations=("send", "create_address", "create_durable_queue")),
    Producer("openwire-producer-topic", "topic"),
    CompositeProducer(),
    Consumer("openwire-consumer-queue", "queue", operations=("consume", "create_address", "create_durable_queue")),
    Consumer("openwire-consumer-topic", "topic"),
    Browser(),
    DurableSubscriber(),
]

__all__ = ["PATHS"]
