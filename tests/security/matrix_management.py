"""The management entry paths of the permission matrix: each management operation over the HTTP
API and over AMQP request/response on `hermod.management`, checked per address as the
contract's "Security" says (reads need `browse` on the queue's address; create, purge and delete
`manage` there, delete also `delete_queue`; move and retry `manage` on the source and `send` on
where they write; a send `send`; connections and metrics `browse` / `manage` from a `#` entry;
lists and explain show only what the user may browse). The console is the same API behind the
same credentials; its page is one more cell.

A management operation is an `Action` (the request in both transports and how to see its
effect); a `Management` path is an action over one transport."""
from __future__ import annotations

from proton import Message

from hermod_testing import wait_for
from matrix_core import (ALL, UNAUTHORIZED, Case, EntryPath, Outcome, Wire, allowed, anycast_address, denied, q)

HIDDEN = "hidden"  # a list answered, without what the user may not browse


class Action:
    """One management operation. `operation` is the right the cell is about."""
    name = ""
    operation = ""
    broker_wide = False  # decided by a `#` entry: the admin may, a tenant with rights on some addresses not
    lists = False        # a refusal is the thing missing from the answer, not a 403
    missing = False      # acts on what does not exist: allowed is a 404, refused the usual 403
    transports = ("http", "amqp")

    def needs(self) -> frozenset[str]:
        return frozenset({self.operation})

    def stand_ins(self) -> frozenset[str]:
        # The HTTP gate lets `manage` users read ("for GET requests, browse is enough"): the denied
        # user of a read holds neither, so the per-address rule is what refuses it.
        return frozenset({"manage"}) if self.operation == "browse" else frozenset()

    def toml(self, case: Case) -> str:
        return anycast_address(case.address)

    def setup(self, wire: Wire, case: Case) -> None:
        """State to act on, made by the admin."""

    def http(self, case: Case) -> tuple[str, str, dict | None]:
        raise NotImplementedError

    def amqp(self, case: Case) -> tuple[str, dict]:
        raise NotImplementedError

    def done(self, wire: Wire, case: Case, answer) -> bool:
        """The allowed request's effect."""
        raise NotImplementedError

    def untouched(self, wire: Wire, case: Case, answer) -> bool:
        """After a refusal: nothing changed (for lists: the answer hides the cell's address)."""
        return True


class QueueGet(Action):
    name, operation = "queue-get", "browse"

    def setup(self, wire, case):
        wire.send(case.address, case.tag)

    def http(self, case):
        return "GET", f"/api/queues/{q(case.address)}", None

    def amqp(self, case):
        return "queue.get", {"name": case.address}

    def done(self, wire, case, answer):
        return isinstance(answer, dict) and answer.get("messages") == 1


class QueuePeek(QueueGet):
    name = "queue-peek"

    def http(self, case):
        return "GET", f"/api/queues/{q(case.address)}/messages", None

    def amqp(self, case):
        return "queue.browse", {"name": case.address}

    def done(self, wire, case, answer):
        return isinstance(answer, list) and [m.get("body") for m in answer] == [case.tag] and \
            wire.messages(case.address) == 1


class QueueList(Action):
    name, operation, lists = "queue-list", "browse", True

    def http(self, case):
        return "GET", "/api/queues", None

    def amqp(self, case):
        return "queue.list", {}

    def done(self, wire, case, answer):
        return isinstance(answer, list) and any(r.get("name") == case.address for r in answer)

    def untouched(self, wire, case, answer):
        return not isinstance(answer, list) or not any(r.get("name") == case.address for r in answer)


class AddressList(QueueList):
    name = "address-list"

    def http(self, case):
        return "GET", "/api/addresses", None

    def amqp(self, case):
        return "address.list", {}


class Explain(QueueList):
    name = "explain"

    def http(self, case):
        return "GET", f"/api/explain?address={q(case.address)}", None

    def amqp(self, case):
        return "explain", {"address": case.address}

    def done(self, wire, case, answer):
        return isinstance(answer, dict) and case.address in answer.get("queues", ())

    def untouched(self, wire, case, answer):
        return answer is None or isinstance(answer, str) or \
            (isinstance(answer, dict) and case.address not in answer.get("queues", ()))


class Purge(QueueGet):
    name, operation = "queue-purge", "manage"

    def http(self, case):
        return "POST", f"/api/queues/{q(case.address)}/purge", {}

    def amqp(self, case):
        return "queue.purge", {"name": case.address}

    def done(self, wire, case, answer):
        return isinstance(answer, dict) and answer.get("removed") == 1 and wire.messages(case.address) == 0

    def untouched(self, wire, case, answer):
        return wire.messages(case.address) == 1


class QueueGetFqqn(QueueGet):
    """The queue named `address::queue`: checked on the address part."""
    name = "queue-get-fqqn"

    def http(self, case):
        return "GET", f"/api/queues/{q(case.address + '::' + case.address)}", None

    def amqp(self, case):
        return "queue.get", {"name": f"{case.address}::{case.address}"}


class PurgeFqqn(Purge):
    name = "queue-purge-fqqn"

    def http(self, case):
        return "POST", f"/api/queues/{q(case.address + '::' + case.address)}/purge", {}

    def amqp(self, case):
        return "queue.purge", {"name": f"{case.address}::{case.address}"}


class Missing:
    """A mixin: the action on a queue that does not exist, 404 to a user who may act where it
    would be, and the same 403 as for an existing queue to one who may not (the answer tells no
    tenant which of another's queues exist)."""
    missing = True

    def toml(self, case):
        return ""

    def setup(self, wire, case):
        pass

    def done(self, wire, case, answer):
        return wire.queue(case.address) is None

    def untouched(self, wire, case, answer):
        return wire.queue(case.address) is None


class MissingGet(Missing, QueueGet):
    name = "queue-get-missing"


class MissingPurge(Missing, Purge):
    name = "queue-purge-missing"


class Move(Action):
    """`manage` on the source (the cell's address), to an open address."""
    name, operation = "queue-move", "manage"

    def source(self, case):
        return case.address

    def target(self, case):
        return case.open_address

    def needs(self):
        return frozenset({"manage", "send"})

    def toml(self, case):
        return anycast_address(case.address) + anycast_address(case.open_address)

    def setup(self, wire, case):
        wire.send(self.source(case), case.tag)

    def http(self, case):
        return "POST", f"/api/queues/{q(self.source(case))}/move", {"to": self.target(case)}

    def amqp(self, case):
        return "queue.move", {"name": self.source(case), "to": self.target(case)}

    def done(self, wire, case, answer):
        return isinstance(answer, dict) and answer.get("moved") == 1 and \
            wire.take(self.target(case), 1) == [case.tag] and wire.messages(self.source(case)) == 0

    def untouched(self, wire, case, answer):
        return wire.messages(self.source(case)) == 1 and wire.messages(self.target(case)) == 0


class MoveTo(Move):
    """`send` on where a move writes (the cell's address), from an open queue."""
    name, operation = "queue-move-to", "send"

    def source(self, case):
        return case.open_address

    def target(self, case):
        return case.address


class Retry(Move):
    """`manage` on the dead-letter queue (the cell's address), back to an open address."""
    name, operation = "queue-retry", "manage"

    def toml(self, case):
        return super().toml(case) + f'[[address_settings]]\nmatch = "{self.target(case)}"\n' \
                                    f'dead_letter_address = "{self.source(case)}"\n'

    def setup(self, wire, case):
        conn = wire.amqp("admin")
        try:
            conn.create_sender(self.target(case)).send(Message(body=case.tag))
            receiver = conn.create_receiver(self.target(case), credit=1)
            receiver.receive(timeout=10)
            receiver.reject()
        finally:
            conn.close()
        wait_for(lambda: wire.messages(self.source(case)) == 1, message="one dead letter")

    def http(self, case):
        return "POST", f"/api/queues/{q(self.source(case))}/retry", {}

    def amqp(self, case):
        return "queue.retry", {"name": self.source(case)}


class RetryTo(Retry):
    """`send` on the address a retry writes back to (the cell's address), from an open DLQ."""
    name, operation = "queue-retry-to", "send"

    def source(self, case):
        return case.open_address

    def target(self, case):
        return case.address


class Send(Action):
    name, operation = "message-send", "send"

    def http(self, case):
        return "POST", f"/api/addresses/{q(case.address)}/messages", {"body": case.tag}

    def amqp(self, case):
        return "message.send", {"address": case.address, "body": case.tag}

    def done(self, wire, case, answer):
        return isinstance(answer, dict) and case.address in answer.get("routed_to", ()) and \
            wire.take(case.address, 1) == [case.tag]

    def untouched(self, wire, case, answer):
        return wire.messages(case.address) == 0


class QueueCreate(Action):
    name, operation = "queue-create", "manage"

    def made(self, case):
        return f"{case.address}.made"

    def toml(self, case):
        return f'[[address]]\nname = "{case.address}"\nrouting = ["anycast"]\n'

    def http(self, case):
        return "POST", "/api/queues", {"name": self.made(case), "address": case.address, "routing_type": "anycast"}

    def amqp(self, case):
        return "queue.create", {"name": self.made(case), "address": case.address, "routing_type": "anycast"}

    def done(self, wire, case, answer):
        return wire.queue(self.made(case)) is not None

    def untouched(self, wire, case, answer):
        return wire.queue(self.made(case)) is None


class QueueDelete(Action):
    """Delete needs `manage` and `delete_queue` on the queue's address: one cell each."""
    name = "queue-delete"

    def __init__(self, operation: str):
        self.operation = operation

    def needs(self):
        return frozenset({"manage", "delete_queue"})

    def http(self, case):
        return "DELETE", f"/api/queues/{q(case.address)}", None

    def amqp(self, case):
        return "queue.delete", {"name": case.address}

    def done(self, wire, case, answer):
        return wire.queue(case.address) is None

    def untouched(self, wire, case, answer):
        return wire.queue(case.address) is not None


class MissingDelete(Missing, QueueDelete):
    name = "queue-delete-missing"


class AddressCreate(Action):
    name, operation = "address-create", "manage"

    def toml(self, case):
        return ""

    def http(self, case):
        return "POST", "/api/addresses", {"name": case.address, "routing_types": ["anycast"]}

    def amqp(self, case):
        return "address.create", {"name": case.address, "routing_types": ["anycast"]}

    def done(self, wire, case, answer):
        return case.address in wire.addresses()

    def untouched(self, wire, case, answer):
        return case.address not in wire.addresses()


class AddressDelete(AddressCreate):
    name = "address-delete"

    def toml(self, case):
        return f'[[address]]\nname = "{case.address}"\nrouting = ["anycast"]\n'

    def http(self, case):
        return "DELETE", f"/api/addresses/{q(case.address)}", None

    def amqp(self, case):
        return "address.delete", {"name": case.address}

    def done(self, wire, case, answer):
        return case.address not in wire.addresses()

    def untouched(self, wire, case, answer):
        return case.address in wire.addresses()


class Connections(Action):
    """Broker-wide: `browse` from a `#` entry. A bystander connection is open meanwhile."""
    name, operation, broker_wide = "connection-list", "browse", True

    def toml(self, case):
        return ""

    def setup(self, wire, case):
        case_bystander[case.id] = wire.amqp("admin", container_id=f"pm-{case.id}")

    def http(self, case):
        return "GET", "/api/connections", None

    def amqp(self, case):
        return "connection.list", {}

    def done(self, wire, case, answer):
        case_bystander.pop(case.id).close()
        return isinstance(answer, list) and any(c.get("container_id") == f"pm-{case.id}" for c in answer)

    def untouched(self, wire, case, answer):
        case_bystander.pop(case.id).close()
        return True


class ConnectionClose(Connections):
    """Broker-wide: `manage` from a `#` entry; the bystander is closed or stays."""
    name, operation = "connection-close", "manage"

    def http(self, case):
        return "DELETE", f"/api/connections/{q(case_ids[case.id])}", None

    def amqp(self, case):
        return "connection.close", {"id": case_ids[case.id]}

    def setup(self, wire, case):
        super().setup(wire, case)
        case_ids[case.id] = wire.connection_id(f"pm-{case.id}")

    def done(self, wire, case, answer):
        wait_for(lambda: wire.connection_id(f"pm-{case.id}") is None, message="the bystander closed")
        case_bystander.pop(case.id, None)
        return True

    def untouched(self, wire, case, answer):
        still = wire.connection_id(f"pm-{case.id}") is not None
        case_bystander.pop(case.id).close()
        return still


class Metrics(Connections):
    name, transports = "metrics", ("http",)

    def setup(self, wire, case):
        pass

    def http(self, case):
        return "GET", "/metrics", None

    def done(self, wire, case, answer):
        return isinstance(answer, str) and "rabbitmq_queue_messages" in answer

    def untouched(self, wire, case, answer):
        return True


class Console(Action):
    """The console's page: any user with a right somewhere (it then calls the API, whose every
    operation is a cell above); a known user with no right at all gets 403."""
    name, operation, transports = "console", "browse", ("http",)

    def toml(self, case):
        return ""

    def http(self, case):
        return "GET", "/", None

    def done(self, wire, case, answer):
        return isinstance(answer, str) and "<html" in answer.lower()


case_bystander: dict = {}  # the connections a connection cell watches, by case id
case_ids: dict = {}


class Management(EntryPath):
    """An `Action` over one transport: "http" (the JSON API with Basic credentials) or "amqp"
    (`hermod.management` request/response)."""

    def __init__(self, action: Action, transport: str):
        self.action, self.transport = action, transport
        self.name = f"{transport}-{action.name}"
        self.protocol = transport
        self.operations = (action.operation,)
        refusals = ("HTTP 403",) if transport == "http" else (UNAUTHORIZED, "status 403")
        self.denials = refusals + ((HIDDEN,) if action.lists else ())
        self.names_denial = False  # the contract leaves a management refusal's text open

    def needs(self, operation):
        return self.action.needs()

    def stand_ins(self, operation):
        return self.action.stand_ins()

    def users(self, operation):
        if isinstance(self.action, Console):
            return "may", "nobody"
        return ("admin", "maynot") if self.action.broker_wide else ("may", "maynot")

    def entries(self, operation, index):
        if self.action.broker_wide or isinstance(self.action, Console):
            return []  # the `#` entry (admin) decides; maynot holds rights on other cells' addresses
        return super().entries(operation, index)

    def toml(self, case):
        return self.action.toml(case)

    def attempt(self, wire, case):
        action = self.action
        action.setup(wire, case)
        if self.transport == "http":
            method, path, body = action.http(case)
            status, answer = wire.http(case.user, method, path, body)
            ok, word = status in ((404,) if action.missing else (200, 201, 204)), f"HTTP {status}"
            refused = status == 403
        else:
            operation, args = action.amqp(case)
            status, answer = wire.management(case.user, operation, args)
            ok, word = status == (404 if action.missing else 200), \
                (f"status {status}" if isinstance(status, int) else str(status))
            refused = status == 403 or status == UNAUTHORIZED
        if ok and action.lists and action.untouched(wire, case, answer):
            return denied(HIDDEN, True)
        if ok:
            return allowed(word, action.done(wire, case, answer))
        if refused:
            return denied(word, action.untouched(wire, case, answer))
        return Outcome("error", word, False, str(answer))


ACTIONS: list[Action] = [QueueGet(), QueueGetFqqn(), QueuePeek(), QueueList(), AddressList(), Explain(), Purge(),
                         PurgeFqqn(), MissingGet(), MissingPurge(), MissingDelete("delete_queue"), Move(),
                         MoveTo(), Retry(), RetryTo(), Send(), QueueCreate(), QueueDelete("manage"),
                         QueueDelete("delete_queue"), AddressCreate(), AddressDelete(), Connections(),
                         ConnectionClose(), Metrics(), Console()]

PATHS: list[EntryPath] = [Management(action, transport) for action in ACTIONS for transport in action.transports]

__all__ = ["PATHS", "ALL"]
