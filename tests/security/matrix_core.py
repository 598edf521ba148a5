"""The permission matrix's vocabulary: the users and rights, a case (one cell tried by one user),
the outcome an entry path reports, the `EntryPath` interface every way in implements, and
`Wire`, the admin's view of the broker used to check effects (over AMQP and HTTP).

An entry path is one way a client reaches an address (an AMQP attach by name, a prefix, an
FQQN, the management API over HTTP, and later an OpenWire producer, a STOMP SUBSCRIBE, an MQTT
PUBLISH...). It says which operations it exercises, which rights a user needs on the cell's
addresses to succeed, what its protocol answers a refusal with, and `attempt`s the operation
as a user over the wire, reporting what the wire said and whether the effect happened (or, for
a refusal, that nothing changed). permission_matrix.py turns the registered paths into cells,
one broker config and the parametrized cases."""
from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from proton import Message
from proton.utils import BlockingConnection, LinkDetached

from hermod.broker.security.passwords import hash_password

TESTS = Path(__file__).resolve().parent.parent
for helper_dir in (TESTS / "http", TESTS / "wire"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from http_helpers import call, http_url, q  # noqa: E402

TIMEOUT = 10
UNAUTHORIZED = "amqp:unauthorized-access"  # the AMQP condition of every refusal
RIGHTS = ("send", "consume", "browse", "create_address", "create_durable_queue", "delete_queue", "manage")
ALL = frozenset(RIGHTS)

# admin: every right everywhere (`#` too: broker-wide reads and writes); may / maynot: the
# rights each cell's entries give them; nobody: a known user with no right at all.
USERS = {"admin": "admin-pw-1", "may": "may-pw-2", "maynot": "maynot-pw-3", "nobody": "nobody-pw-4"}
MANAGEMENT = "hermod.management"


def users_toml() -> str:
    return "".join(f'[[security.user]]\nname = "{name}"\npassword_hash = "{hash_password(pw, iterations=64)}"\n'
                   f'roles = ["{name}"]\n' for name, pw in USERS.items())


@dataclass(frozen=True)
class Outcome:
    """What the wire answered. `verdict` is "allowed" or "denied"; `answer` the wire's own word
    (an AMQP condition or outcome, "HTTP 403", "filtered" for a message that never entered,
    "nothing" for recovery state not handed over); `effect`: for an allowed attempt, that the
    operation's effect was seen (the message arrived, the queue was purged...), for a denied
    one, that nothing changed."""
    verdict: str
    answer: str
    effect: bool
    detail: str = ""


def allowed(answer: str, effect: bool, detail: str = "") -> Outcome:
    return Outcome("allowed", answer, bool(effect), detail)


def denied(answer: str, effect: bool, detail: str = "") -> Outcome:
    """A refusal; `detail` defaults to the refusal's description when `answer` carries one."""
    return Outcome("denied", str(answer), bool(effect), detail or getattr(answer, "description", ""))


class Condition(str):
    """An AMQP condition name that remembers the refusal's text."""
    description = ""


@dataclass(frozen=True)
class Case:
    """One cell (operation x entry path) tried by one user: the addresses it uses are its own."""
    operation: str
    path: EntryPath
    index: int
    user: str
    expect: str  # "allowed" | "denied"

    @property
    def prefix(self) -> str:
        return self.path.prefix(self.index)

    @property
    def address(self) -> str:
        """The address the operation touches (the cell's entry decides it)."""
        return f"{self.prefix}.{self.user}"

    @property
    def open_address(self) -> str:
        """An address both may and maynot may do everything on (composites' permitted part, a
        move's other side...)."""
        return f"{self.prefix}.open.{self.user}"

    @property
    def tag(self) -> str:
        """A body nobody else sends."""
        return f"{self.path.name}:{self.operation}:{self.user}"

    @property
    def id(self) -> str:
        return f"{self.operation}-{self.path.name}-{self.expect}"


class EntryPath:
    """One way in. Subclasses set `name`, `protocol`, `operations` and `denials`, and implement
    `attempt`; the rest has defaults that fit most paths."""
    name = ""
    protocol = "amqp"
    operations: tuple[str, ...] = ()
    denials: tuple[str, ...] = (UNAUTHORIZED,)  # the wire answers that count as a refusal
    # An `amqp:unauthorized-access` refusal names the operation and the address (the contract);
    # False where the refusal is about ownership or another protocol's text.
    names_denial = True

    def denial_address(self, case: Case) -> str:
        """The address a refusal of `case` names: the one the operation touches."""
        return case.address

    def prefix(self, index: int) -> str:
        """The cell's own address prefix: no two cells share an entry."""
        return f"pm.c{index:03d}"

    def needs(self, operation: str) -> frozenset[str]:
        """The rights the allowed role gets on the cell's addresses: `operation` and what the
        path needs besides it to show the effect."""
        return frozenset({operation})

    def stand_ins(self, operation: str) -> frozenset[str]:
        """Rights the contract might let stand in for `operation` on this path: kept from the
        denied role, so its refusal tests `operation` alone."""
        return frozenset()

    def users(self, operation: str) -> tuple[str, str]:
        """(the user that may, the user that may not)."""
        return "may", "maynot"

    def entries(self, operation: str, index: int) -> list[tuple[str, dict[str, frozenset[str]]]]:
        """The cell's `[[security.permission]]` entries: (match, {user: rights}). By default the
        allowed user gets `needs`, the denied user every right but the operation (and its
        stand-ins), and `PREFIX.open.#` gives both everything."""
        p = self.prefix(index)
        yes, no = self.users(operation)
        return [(f"{p}.#", {yes: self.needs(operation), no: ALL - {operation} - self.stand_ins(operation)}),
                (f"{p}.open.#", {yes: ALL, no: ALL})]

    def toml(self, case: Case) -> str:
        """Config the case needs besides permissions: `[[address]]` it uses, address settings."""
        return ""

    def attempt(self, wire: Wire, case: Case) -> Outcome:
        raise NotImplementedError


def anycast_address(name: str, queue: str | None = None) -> str:
    return f'[[address]]\nname = "{name}"\nrouting = ["anycast"]\n  [[address.queue]]\n  name = "{queue or name}"\n' \
           f'  routing = "anycast"\n'


def multicast_address(name: str, queue: str | None = None) -> str:
    text = f'[[address]]\nname = "{name}"\nrouting = ["multicast"]\n'
    if queue:
        text += f'  [[address.queue]]\n  name = "{queue}"\n  routing = "multicast"\n'
    return text


def refusal(action):
    """(the link, None) or (None, the condition the broker refused the attach with)."""
    try:
        return action(), None
    except LinkDetached as e:
        condition = Condition(e.condition)
        condition.description = str(e)
        return None, condition


class Wire:
    """Clients for one broker: logins per user, and the admin's checks of what happened."""

    def __init__(self, broker):
        self.broker = broker
        self.url = broker.url
        self.address = broker.address
        self.base = http_url(broker)
        self._admin: BlockingConnection | None = None
        self._admin_links = None

    # -- clients ------------------------------------------------------------------------------
    def amqp(self, user: str, container_id: str | None = None) -> BlockingConnection:
        return BlockingConnection(self.url, user=user, password=USERS[user], allowed_mechs="PLAIN",
                                  allow_insecure_mechs=True, timeout=TIMEOUT, container_id=container_id)

    def http(self, user: str | None, method: str, path: str, body=None, password: str | None = None):
        """(status, answer) as `user` with Basic credentials (None: none sent); every request
        carries `Content-Type: application/json` (the contract's rule for POST and DELETE)."""
        import base64
        headers = {}
        if user is not None:
            token = base64.b64encode(f"{user}:{password or USERS[user]}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        return call(self.base, method, path, body, headers=headers)

    def management(self, user: str, operation: str, args: dict | None = None) -> tuple[object, object]:
        """One request on `hermod.management` as `user`: (status, decoded answer), or
        (the condition, None) when the broker refused a link. The admin's requests share one
        connection; any other user's get a connection of their own."""
        if user == "admin":
            return self._request(self._admin_management(), operation, args)
        conn = self.amqp(user)
        try:
            receiver, cond = refusal(lambda: conn.create_receiver(None, dynamic=True))
            if cond:
                return cond, None
            sender, cond = refusal(lambda: conn.create_sender(MANAGEMENT))
            if cond:
                return cond, None
            return self._request((sender, receiver), operation, args)
        finally:
            conn.close()

    @staticmethod
    def _request(links, operation: str, args: dict | None) -> tuple[object, object]:
        sender, receiver = links
        properties = {"operation": operation}
        for key, value in (args or {}).items():
            properties[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
        request_id = str(uuid.uuid4())
        sender.send(Message(id=request_id, reply_to=receiver.link.remote_source.address, properties=properties))
        reply = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        assert reply.correlation_id == request_id, "a reply to another request"
        status = (reply.properties or {}).get("status")
        body = reply.body
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                pass
        return status, body if status == 200 else (reply.properties or {}).get("error")

    # -- the admin's view ----------------------------------------------------------------------
    def admin(self) -> BlockingConnection:
        """The admin's one connection, opened on first use (the checks are many and small)."""
        if self._admin is None:
            self._admin = self.amqp("admin")
            self._admin_links = None
        return self._admin

    def _admin_management(self):
        conn = self.admin()
        if self._admin_links is None:
            self._admin_links = (conn.create_sender(MANAGEMENT), conn.create_receiver(None, dynamic=True))
        return self._admin_links

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def send(self, address: str, *bodies: str, properties: dict | None = None) -> None:
        sender = self.admin().create_sender(address)
        try:
            for body in bodies:
                sender.send(Message(body=body, properties=properties))
        finally:
            sender.close()

    def take(self, source: str, count: int) -> list:
        """`count` messages taken (accepted) from `source` by the admin."""
        receiver = self.admin().create_receiver(source, credit=count)
        try:
            got = []
            for _ in range(count):
                got.append(receiver.receive(timeout=TIMEOUT).body)
                receiver.accept()
            return got
        finally:
            receiver.close()  # a round trip: the acceptances are handled

    def queue(self, name: str) -> dict | None:
        status, answer = self.management("admin", "queue.get", {"name": name})
        if status == 404:
            return None
        assert status == 200, (status, answer)
        return answer

    def messages(self, name: str) -> int | None:
        info = self.queue(name)
        return None if info is None else info["messages"]

    def queues_on(self, address: str) -> list[dict]:
        status, answer = self.management("admin", "queue.list", {"search": address})
        assert status == 200, (status, answer)
        return [row for row in answer if row["address"] == address]

    def addresses(self) -> set[str]:
        status, answer = self.management("admin", "address.list")
        assert status == 200, (status, answer)
        return {row["name"] for row in answer}

    def logged(self, *words: str) -> bool:
        """Some line of the broker's log holds every one of `words` (a denial's log line)."""
        return any(all(w in line for w in words) for line in self.broker.stderr_lines)

    def connection_id(self, container_id: str) -> str | None:
        status, answer = self.management("admin", "connection.list")
        assert status == 200, (status, answer)
        return next((str(c["id"]) for c in answer if c.get("container_id") == container_id), None)


__all__ = ["ALL", "Case", "EntryPath", "Outcome", "RIGHTS", "UNAUTHORIZED", "USERS", "Wire", "allowed",
           "anycast_address", "denied", "multicast_address", "q", "refusal", "users_toml"]
