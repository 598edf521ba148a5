"""The AMQP entry paths of the permission matrix: every way an attach or a transfer names an
address (the contract's "AMQP names a client uses"), each checked against the address it
touches. Real Proton clients; link recovery is spoken frame by frame (no client sends an
unsettled map)."""
from __future__ import annotations

import proton
from proton import Described, Message, uint, ulong
from proton.reactor import Copy, DurableSubscription, Selector

from hermod.broker.tools.clients import Capabilities
from hermod_testing import wait_for
from matrix_core import (ALL, UNAUTHORIZED, USERS, Case, EntryPath, Outcome, Wire, allowed, anycast_address, denied,
                         multicast_address, refusal)
from security_clients import engine_login, relay_send

CREATE = frozenset({"create_address", "create_durable_queue"})


def taken(receiver, count: int) -> list:
    got = []
    for _ in range(count):
        got.append(receiver.receive(timeout=10).body)
        receiver.accept()
    return got


class Target(EntryPath):
    """A sender attach naming the address as written (`form`): plain, a prefix. `send` to an
    existing address, `create_address` / `create_durable_queue` to a new one."""

    def __init__(self, name: str, form: str, multicast: bool = False, operations=("send",),
                 capability: str | None = None):
        self.name, self.form, self.multicast, self.operations = name, form, multicast, operations
        self.capability = capability

    def needs(self, operation):
        return frozenset({operation, "send"}) | (CREATE if operation in CREATE else frozenset())

    def toml(self, case):
        if case.operation != "send":
            return ""  # the attach would create it
        if self.multicast:
            return multicast_address(case.address, f"{case.address}.sub")
        return anycast_address(case.address)

    def attempt(self, wire: Wire, case: Case) -> Outcome:
        conn = wire.amqp(case.user)
        try:
            options = [Capabilities(self.capability, on_source=False)] if self.capability else None
            sender, cond = refusal(lambda: conn.create_sender(self.form.format(case.address), options=options))
            if cond:
                if case.operation == "send":
                    nothing = wire.messages(f"{case.address}.sub" if self.multicast else case.address) == 0
                else:
                    nothing = case.address not in wire.addresses()
                return denied(cond, nothing)
            sender.send(Message(body=case.tag))
        finally:
            conn.close()
        if case.operation == "send" and self.multicast:
            return allowed("accepted", wire.take(f"{case.address}::{case.address}.sub", 1) == [case.tag])
        if self.multicast:  # created: a multicast address, no queue to see the message on
            return allowed("accepted", case.address in wire.addresses())
        return allowed("accepted", wire.take(case.address, 1) == [case.tag])


class CompositeTarget(EntryPath):
    """`a,b`: each part is checked; one forbidden part refuses the whole attach and nothing is
    sent to the permitted one."""
    name = "amqp-target-composite"
    operations = ("send",)

    def toml(self, case):
        return anycast_address(case.address) + anycast_address(case.open_address)

    def attempt(self, wire, case):
        conn = wire.amqp(case.user)
        try:
            sender, cond = refusal(lambda: conn.create_sender(f"{case.open_address},{case.address}"))
            if cond:
                return denied(cond, wire.messages(case.open_address) == 0 and wire.messages(case.address) == 0)
            sender.send(Message(body=case.tag))
        finally:
            conn.close()
        return allowed("accepted", wire.take(case.address, 1) == [case.tag] and
                       wire.take(case.open_address, 1) == [case.tag])


class Relay(EntryPath):
    """An anonymous-relay link: checked per message (`rejected` with the condition); the link
    stays usable for the addresses the user may send to. `fqqn`: the message's `to` names
    `address::queue`."""

    def __init__(self, name: str, operations=("send", "create_address"), fqqn: bool = False):
        self.name, self.operations, self.fqqn = name, operations, fqqn

    def to(self, case) -> str:
        return f"{case.address}::{case.address}" if self.fqqn else case.address

    def needs(self, operation):
        return frozenset({"send"}) | (CREATE if operation in CREATE else frozenset())

    def toml(self, case):
        return anycast_address(case.open_address) + (anycast_address(case.address) if case.operation == "send" else "")

    def attempt(self, wire, case):
        client = engine_login(wire.address, case.user, USERS[case.user])
        try:
            state, cond, text = relay_send(client, self.to(case), case.tag)
            usable = relay_send(client, case.open_address, "after")[0] == proton.Delivery.ACCEPTED
        finally:
            client.sock.close()
        if state != proton.Delivery.ACCEPTED:
            if case.operation == "send":
                nothing = wire.messages(case.address) == 0
            else:
                nothing = case.address not in wire.addresses()
            return denied(cond or f"state {state}", nothing and usable, text or "")
        return allowed("accepted", usable and wire.take(case.address, 1) == [case.tag])


class Source(EntryPath):
    """A receiver attach taking messages from the address as written (`form`): by name, a
    prefix, an FQQN, a composite of parts. Anycast sources find a message the admin put there
    and a refusal leaves it; topic sources subscribe and get what the admin sends next."""

    def __init__(self, name: str, form: str, topic: bool = False, capability: str | None = None,
                 operations=("consume",)):
        self.name, self.form, self.topic, self.capability, self.operations = name, form, topic, capability, operations

    def needs(self, operation):
        return frozenset({operation, "consume"}) | (CREATE if operation in CREATE else frozenset())

    def queue(self, case) -> str:
        return f"{case.address}.fq" if "::" in self.form else case.address

    def toml(self, case):
        if case.operation != "consume":
            return ""  # the attach creates the address and its queue
        if self.topic:
            return multicast_address(case.address)
        return anycast_address(case.address, self.queue(case))

    def attempt(self, wire, case):
        preload = case.operation == "consume" and not self.topic
        if preload:
            wire.send(case.address, case.tag)
        options = [Capabilities(self.capability)] if self.capability else None
        conn = wire.amqp(case.user)
        try:
            source = self.form.format(address=case.address, queue=self.queue(case))
            receiver, cond = refusal(lambda: conn.create_receiver(source, credit=5, options=options))
            if cond:
                if preload:
                    return denied(cond, wire.messages(self.queue(case)) == 1)
                if case.operation == "create_address":
                    return denied(cond, case.address not in wire.addresses())
                return denied(cond, case.operation == "consume" or wire.queues_on(case.address) == [])
            if self.topic:
                wire.send(f"topic://{case.address}", case.tag)
            elif not preload:
                wire.send(case.address, case.tag)
            got = taken(receiver, 1)
        finally:
            conn.close()
        left = wire.messages(self.queue(case)) if preload else 0  # an auto-created queue may be gone
        return allowed("attached", got == [case.tag] and left == 0)


class BrowseOnly(EntryPath):
    """`browse` alone: a browser (distribution mode copy) sees the messages and leaves them; an
    attach that would take them needs `consume`. The denied user of `consume` holds `browse`
    only and must still be able to browse (so the refusal is about taking, not the address).
    `subscription`: the queue is another user's durable subscription, reached by FQQN."""

    def __init__(self, name: str, form: str, operation: str, subscription: bool = False):
        self.name, self.form, self.operations, self.subscription = name, form, (operation,), subscription

    def queue(self, case) -> str:
        if self.subscription:
            return f"pm-owner-{case.index}-{case.user}.sub"  # Artemis's naming: container id . link name
        return f"{case.address}.fq" if "::" in self.form else case.address

    def entries(self, operation, index):
        p = self.prefix(index)
        if operation == "browse":  # may: browse; maynot: everything else (consume included)
            return [(f"{p}.#", {"may": frozenset({"browse"}), "maynot": ALL - {"browse"}})]
        return [(f"{p}.#", {"may": frozenset({"consume", "browse"}), "maynot": frozenset({"browse"})})]

    def toml(self, case):
        return multicast_address(case.address) if self.subscription else anycast_address(case.address, self.queue(case))

    def prepare(self, wire, case) -> None:
        if self.subscription:  # the admin's durable subscription, detached, holding one message
            conn = wire.amqp("admin", container_id=f"pm-owner-{case.index}-{case.user}")
            try:
                conn.create_receiver(case.address, name="sub", options=[DurableSubscription(),
                                                                         Capabilities("topic")]).detach()
            finally:
                conn.close()
            wire.send(f"topic://{case.address}", case.tag)
        else:
            wire.send(case.address, case.tag)
        assert wire.messages(self.queue(case)) == 1, "the queue to read from holds the message"

    def attempt(self, wire, case):
        source = self.form.format(address=case.address, queue=self.queue(case))
        self.prepare(wire, case)
        conn = wire.amqp(case.user)
        try:
            if case.operation == "browse":
                receiver, cond = refusal(lambda: conn.create_receiver(source, credit=5, options=Copy()))
                verdict = denied if cond else allowed
                seen = [] if cond else taken(receiver, 1)  # a browser's accept must not take it
            else:
                receiver, cond = refusal(lambda: conn.create_receiver(source, credit=5))
                verdict = denied if cond else allowed
                if cond:  # a browser is still allowed, and its accept takes nothing
                    seen = taken(conn.create_receiver(source, name="browser", credit=5, options=Copy()), 1)
                else:
                    seen = taken(receiver, 1)
        finally:
            conn.close()  # a round trip: the dispositions above have been handled
        left = 0 if verdict is allowed and case.operation == "consume" else 1
        ok = wire.messages(self.queue(case)) == left and (seen == [case.tag] or verdict is denied and not seen)
        return verdict(cond or "attached", ok)


class CompositeSource(EntryPath):
    """`a,b` as a source consumes from every part: each part is checked."""
    name = "amqp-source-composite"
    operations = ("consume",)

    def toml(self, case):
        return anycast_address(case.address) + anycast_address(case.open_address)

    def attempt(self, wire, case):
        wire.send(case.address, case.tag)
        wire.send(case.open_address, case.tag)
        conn = wire.amqp(case.user)
        try:
            receiver, cond = refusal(lambda: conn.create_receiver(f"{case.open_address},{case.address}", credit=5))
            if cond:
                return denied(cond, wire.messages(case.address) == 1 and wire.messages(case.open_address) == 1)
            got = taken(receiver, 2)
        finally:
            conn.close()
        return allowed("attached", got == [case.tag] * 2 and wire.messages(case.address) == 0
                       and wire.messages(case.open_address) == 0)


class VirtualTopicConsumer(EntryPath):
    """`Consumer.A.VirtualTopic.X`: the consumer queue lives on the topic's address
    `VirtualTopic.X`, and that address is what the attach is checked against (the contract:
    "checked against the address it touches"; Artemis maps the name to the FQQN
    `VirtualTopic.X::Consumer.A.VirtualTopic.X`). No entry names the `Consumer.` queue names:
    a check on the name as written refuses the allowed user, and one on the name alone would let
    a grant on `Consumer.#` read a topic its user may not consume. Its first attach creates the
    durable consumer queue: `create_durable_queue` on the topic's address."""
    name = "amqp-virtual-topic-consumer"
    operations = ("consume", "create_durable_queue")

    def prefix(self, index):
        return f"VirtualTopic.pm.c{index:03d}"

    def needs(self, operation):
        return frozenset({"consume", "create_durable_queue"})

    def entries(self, operation, index):
        # Grants on the consumer queues' names, to the denied user only (what an ActiveMQ
        # Classic config would hold): the topic's address decides, so they neither admit the
        # denied user nor are they needed by the allowed one.
        p = self.prefix(index)
        return [*super().entries(operation, index), (f"Consumer.*.{p}.#", {"maynot": ALL})]

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        consumer_queue = f"Consumer.A.{case.address}"
        conn = wire.amqp(case.user)
        try:
            receiver, cond = refusal(lambda: conn.create_receiver(consumer_queue, credit=5))
            if cond:
                return denied(cond, wire.queue(consumer_queue) is None)
            wire.send(f"topic://{case.address}", case.tag)
            got = taken(receiver, 1)
        finally:
            conn.close()
        return allowed("attached", got == [case.tag])


class WildcardAttach(EntryPath):
    """`ADDRESS.#` with capability topic: `consume` on the pattern at attach. The attach makes
    the pattern's address when it is new (as Artemis does), so the allowed role also holds
    `create_address`; the denied one holds everything but `consume`."""
    name = "amqp-wildcard-subscription"
    operations = ("consume",)

    def denial_address(self, case):
        return f"{case.address}.#"

    def needs(self, operation):
        return frozenset({"consume", "create_address"})

    def attempt(self, wire, case):
        conn = wire.amqp(case.user)
        try:
            receiver, cond = refusal(lambda: conn.create_receiver(f"{case.address}.#", credit=5,
                                                                  options=[Capabilities("topic")]))
            if cond:
                return denied(cond, True)
            wire.send(f"topic://{case.address}.x", case.tag)
            got = taken(receiver, 1)
        finally:
            conn.close()
        return allowed("attached", got == [case.tag])


class WildcardDelivery(EntryPath):
    """A wildcard subscription both users may attach, over an address (`.secret`) only one of
    them may consume: the other's subscription never receives its messages (they never enter
    its queue). The admin sends the secret first and then a marker on an open address, so the
    marker arriving first shows the secret did not enter."""
    name = "amqp-wildcard-delivery"
    names_denial = False  # ownership / filtering: no right is named
    operations = ("consume",)
    denials = ("filtered",)

    def entries(self, operation, index):
        p = self.prefix(index)
        return [(f"{p}.#", {"may": ALL, "maynot": ALL}),
                (f"{p}.*.secret", {"may": frozenset({"consume"}), "maynot": ALL - {"consume"}})]

    def attempt(self, wire, case):
        conn = wire.amqp(case.user)
        try:
            receiver = conn.create_receiver(f"{case.address}.#", credit=5, options=[Capabilities("topic")])
            wire.send(f"topic://{case.address}.secret", "secret")
            wire.send(f"topic://{case.address}.marker", "marker")
            first = taken(receiver, 1)
            if first == ["secret"]:
                return allowed("delivered", taken(receiver, 1) == ["marker"])
            return denied("filtered", first == ["marker"], f"first message {first}")
        finally:
            conn.close()


class DurableSubscription_(EntryPath):
    """A durable subscription: creating it needs `create_durable_queue`; closing it (closed =
    true on its own link) deletes its queue and needs `delete_queue` (refused: the close carries
    the condition and the subscription stays)."""
    name = "amqp-durable-subscription"
    operations = ("create_durable_queue", "delete_queue")

    def needs(self, operation):
        return frozenset({operation, "consume", "create_durable_queue"})

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        options = [DurableSubscription(), Capabilities("topic")]
        conn = wire.amqp(case.user, container_id=f"pm-{case.id}")
        try:
            sub, cond = refusal(lambda: conn.create_receiver(case.address, name="sub", options=options))
            if cond:
                return denied(cond, wire.queues_on(case.address) == [])
            durable = [q for q in wire.queues_on(case.address) if q["durable"]]
            if case.operation == "create_durable_queue":
                sub.detach()
                return allowed("attached", len(durable) == 1)
            sub.close()
            cond = sub.link.remote_condition
        finally:
            conn.close()
        if cond is not None:
            return denied(cond.name, len(wire.queues_on(case.address)) == 1, cond.description or "")
        wait_for(lambda: wire.queues_on(case.address) == [], message="the subscription's queue deleted")
        return allowed("closed", True)


class DurableReselect(EntryPath):
    """Re-attaching a durable subscription with another selector replaces it and its messages:
    `delete_queue`. Refused, the subscription stays with its selector and its message."""
    name = "amqp-durable-resubscribe-selector"
    operations = ("delete_queue",)

    def needs(self, operation):
        return frozenset({"delete_queue", "consume", "create_durable_queue"})

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        container = f"pm-{case.id}"
        conn = wire.amqp(case.user, container_id=container)
        try:
            conn.create_receiver(case.address, name="sub", options=[DurableSubscription(), Capabilities("topic"),
                                                                     Selector("k = 1")]).detach()
        finally:
            conn.close()
        wire.send(f"topic://{case.address}", case.tag, properties={"k": 1})
        conn = wire.amqp(case.user, container_id=container)
        try:
            _, cond = refusal(lambda: conn.create_receiver(case.address, name="sub", options=[
                DurableSubscription(), Capabilities("topic"), Selector("k = 2")]))
        finally:
            conn.close()
        [queue] = wire.queues_on(case.address) or [None]
        if cond:
            return denied(cond, queue is not None and queue["filter"] == "k = 1" and queue["messages"] == 1)
        return allowed("attached", queue is not None and queue["filter"] == "k = 2" and queue["messages"] == 0)


class DurableOwner(EntryPath):
    """A durable subscription belongs to the user who made it: the owner resumes it, another
    user (holding every right on the address) attaching under the same container id and link
    name is refused and the subscription stays. Ownership, not a right: labelled `consume`."""
    name = "amqp-durable-subscription-owner"
    names_denial = False  # ownership / filtering: no right is named
    operations = ("consume",)

    def entries(self, operation, index):
        p = self.prefix(index)
        return [(f"{p}.#", {"may": frozenset({"consume", "create_durable_queue"}), "maynot": ALL})]

    def toml(self, case):
        return multicast_address(case.address)

    def attempt(self, wire, case):
        container, options = f"pm-{case.id}", [DurableSubscription(), Capabilities("topic")]
        owner = wire.amqp("may", container_id=container)
        try:
            owner.create_receiver(case.address, name="sub", options=options).detach()
        finally:
            owner.close()
        wire.send(f"topic://{case.address}", case.tag)
        conn = wire.amqp(case.user, container_id=container)
        try:
            receiver, cond = refusal(lambda: conn.create_receiver(case.address, name="sub", options=options,
                                                                  credit=5))
            if cond:
                [queue] = wire.queues_on(case.address) or [None]
                return denied(cond, queue is not None and queue["messages"] == 1)
            got = taken(receiver, 1)
        finally:
            conn.close()
        return allowed("attached", got == [case.tag])


class LinkRecovery(EntryPath):
    """Link recovery state belongs to its user: the owner (may) re-attaching under its container
    id and link name gets its unsettled map and settles by it; another user attaching there (on
    an address it may consume) with the owner's tags claimed `accepted` gets nothing: refused,
    or an empty unsettled map, and none of the owner's messages acknowledged."""
    name = "amqp-link-recovery"
    names_denial = False  # ownership / filtering: no right is named
    operations = ("consume",)
    denials = (UNAUTHORIZED, "nothing")

    def entries(self, operation, index):
        p = self.prefix(index)
        return [(f"{p}.#", {"may": frozenset({"consume"}), "maynot": frozenset()}),
                (f"{p}.open.#", {"may": ALL, "maynot": ALL})]

    def toml(self, case):
        return anycast_address(case.address) + anycast_address(case.open_address)

    def attempt(self, wire, case):
        container, link = f"pm-{case.id}", "recovering"
        wire.send(case.address, "r1")
        wire.send(case.address, "r2")
        first, next_id = plain_session(wire, "may", container)
        attach_receiver(first, link, case.address)
        give_credit(first, next_id, 2)
        tags = [tag for tag, _ in read_transfers(first, 2)]
        first.close()  # lost with both unsettled
        wait_for(lambda: wire.queue(case.address)["consumers"] == 0, message="the owner's link gone")
        again, next_id = plain_session(wire, case.user, container)
        try:
            where = case.address if case.user == "may" else case.open_address
            reply = attach_receiver(again, link, where, unsettled={t: ACCEPTED for t in tags})
            refused_with = detach_condition(again) if reply.fields[5] is None else None
            remembered = dict(reply.fields[7] or {}) if len(reply.fields) > 7 else {}
        finally:
            again.close()
        stat = wire.queue(case.address)
        if case.user == "may" and refused_with is None and set(remembered) == set(tags):
            wait_for(lambda: wire.queue(case.address)["acked"] == 2, message="the owner's two settled")
            return allowed("recovered", True)
        untouched = stat["acked"] == 0 and stat["messages"] == 2
        if refused_with:
            return denied(refused_with, untouched)
        if not remembered:
            return denied("nothing", untouched)
        return Outcome("allowed", "recovered", untouched, f"unsettled map handed over: {remembered}")


ACCEPTED = Described(ulong(0x24), [])
UNSETTLED_STATE = uint(2)  # terminus durability: the link's unsettled state survives


def attach_receiver(client, name: str, address: str, unsettled=None):
    """A receiving link whose source keeps unsettled state; the broker's attach back."""
    from amqp_frames import ATTACH, SOURCE, TARGET
    source = Described(ulong(SOURCE), [address, UNSETTLED_STATE])
    target = Described(ulong(TARGET), [None])
    client.send(0, ATTACH, [name, uint(0), True, None, None, source, target, unsettled])
    return client.expect(ATTACH)


def give_credit(client, next_incoming: int, credit: int) -> None:
    from amqp_frames import FLOW
    client.send(0, FLOW, [uint(next_incoming), uint(2 ** 31 - 1), uint(0), uint(2 ** 31 - 1), uint(0),
                          uint(0), uint(credit)])


def read_transfers(client, count: int) -> list[tuple[bytes, bytes]]:
    from amqp_frames import TRANSFER
    out = []
    while len(out) < count:
        f = client.expect(TRANSFER)
        out.append((bytes(f.fields[2]), f.payload))
    return out


def plain_session(wire: Wire, user: str, container: str):
    """A raw frame client logged in with SASL PLAIN, one session: (client, next outgoing id)."""
    import time

    from proton import symbol

    from amqp_frames import AMQP_HEADER, OPEN, SASL_HEADER, SASL_INIT, SASL_OUTCOME, FrameClient, encode, frame
    client = FrameClient(wire.address)
    client.sock.sendall(SASL_HEADER)
    client.sock.sendall(frame(0, encode(SASL_INIT, [symbol("PLAIN"), f"\0{user}\0{USERS[user]}".encode()]),
                              frame_type=1))
    assert client._read_exact(8, time.monotonic() + 10) == SASL_HEADER
    while (f := client.read()).code != SASL_OUTCOME:
        pass
    assert int(f.fields[0]) == 0, f"login of {user} failed"
    client.sock.sendall(AMQP_HEADER)
    assert client._read_exact(8, time.monotonic() + 10) == AMQP_HEADER
    client.send(0, OPEN, [container, None, None, None])
    client.expect(OPEN)
    begin = client.begin(0)
    return client, int(begin.fields[1])


def detach_condition(client) -> str | None:
    from amqp_frames import DETACH
    f = client.expect(DETACH)
    return f.error(2)


PATHS: list[EntryPath] = [
    Target("amqp-target-name", "{}", operations=("send", "create_address", "create_durable_queue")),
    Target("amqp-target-anycast-prefix", "anycast://{}"),
    Target("amqp-target-queue-prefix", "queue://{}"),
    Target("amqp-target-multicast-prefix", "multicast://{}", multicast=True, operations=("send", "create_address")),
    Target("amqp-target-topic-prefix", "topic://{}", multicast=True),
    Target("amqp-target-topic-capability", "{}", multicast=True, capability="topic"),
    CompositeTarget(),
    Relay("amqp-anonymous-relay"),
    Relay("amqp-anonymous-relay-fqqn", operations=("send",), fqqn=True),
    Source("amqp-source-name", "{address}", operations=("consume", "create_address", "create_durable_queue")),
    Source("amqp-source-anycast-prefix", "anycast://{address}"),
    Source("amqp-source-queue-prefix", "queue://{address}"),
    Source("amqp-source-multicast-prefix", "multicast://{address}", topic=True),
    Source("amqp-source-topic-prefix", "topic://{address}", topic=True),
    Source("amqp-source-topic-capability", "{address}", topic=True, capability="topic"),
    Source("amqp-source-fqqn", "{address}::{queue}"),
    BrowseOnly("amqp-source-browse-only", "{address}", "consume"),
    BrowseOnly("amqp-source-browser", "{address}", "browse"),
    BrowseOnly("amqp-source-fqqn-browse-only", "{address}::{queue}", "consume"),
    BrowseOnly("amqp-source-fqqn-browser", "{address}::{queue}", "browse"),
    BrowseOnly("amqp-source-fqqn-subscription-browse-only", "{address}::{queue}", "consume", subscription=True),
    BrowseOnly("amqp-source-fqqn-subscription-browser", "{address}::{queue}", "browse", subscription=True),
    CompositeSource(),
    VirtualTopicConsumer(),
    WildcardAttach(),
    WildcardDelivery(),
    DurableSubscription_(),
    DurableReselect(),
    DurableOwner(),
    LinkRecovery(),
]

__all__ = ["PATHS"]
