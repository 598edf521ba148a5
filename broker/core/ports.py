"""The ports the routing core needs from the outside world, as Protocols.

The core never imports Proton or SQL. The protocol adapter implements `Consumer`; the store
implements `Journal`. Everything the core asks the journal to persist is a list of small
operation records submitted as one unit of work: the journal commits the unit in one database
transaction (possibly grouped with other units: group commit) and then calls `done` on the
reactor thread. A durable message is only put on its queues, and its producer only settled, from
that callback ("decide, then commit").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # the core's own types, for the inner ports below (nothing at run time)
    from .address import Address
    from .consumer import Ref
    from .flow import FlowControl
    from .latency import LatencyHistogram
    from .lingering import Lingering
    from .message import Message
    from .queue import Queue
    from .settings import AddressSettings

    Plan = list[tuple[Message, list[Queue]]]  # what `route` decides: (message, its queues)


# ---------------------------------------------------------------------------------------------
# Records: plain data that crosses the core/store boundary.


@dataclass(frozen=True, slots=True)
class AddressRecord:
    name: str
    routing_types: frozenset[str]  # subset of {"anycast", "multicast"}
    auto_created: bool = False


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """Every attribute of a durable queue that must survive a restart."""

    name: str
    address: str
    routing_type: str  # "anycast" | "multicast"
    filter: str | None = None
    max_consumers: int = -1
    exclusive: bool = False
    last_value_key: str | None = None
    auto_created: bool = False
    # What made the queue: "configured", "auto", "subscription", "virtual-topic", ...
    purpose: str = "configured"
    # Free-form attributes later features add (subscription owner, selector cache ...), JSON-able.
    extra: dict = field(default_factory=dict)


# The records built per durable message (MessageRecord, AddMessage, AddReference,
# DeleteReference, SetDeliveryCount) are plain slots classes, not frozen ones: a frozen
# dataclass's __init__ sets each field through object.__setattr__, 0.80 us for a MessageRecord
# against 0.16 us (Python 3.11). Nothing changes them after they are built all the same.
@dataclass(slots=True)
class MessageRecord:
    """A durable message: stored once, whatever the number of queues that reference it."""

    id: int  # broker-assigned, increasing; recovery continues after the highest
    address: str
    encoded: bytes  # the AMQP sections exactly as they will be sent
    routing_type: str | None = None
    priority: int = 4
    expiration: int = 0  # epoch ms, 0 = never
    scheduled_time: int = 0  # epoch ms, 0 = deliver now
    arrival: int = 0  # epoch ms


# Operations of a unit of work.


@dataclass(frozen=True, slots=True)
class PutAddress:
    address: AddressRecord


@dataclass(frozen=True, slots=True)
class DeleteAddress:
    name: str


@dataclass(frozen=True, slots=True)
class PutQueue:
    queue: QueueRecord


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    """Deletes the queue and all its references (messages left unreferenced go too)."""

    name: str


@dataclass(slots=True)
class AddMessage:
    message: MessageRecord


@dataclass(slots=True)
class AddReference:
    queue: str
    message_id: int
    delivery_count: int = 0


@dataclass(slots=True)
class DeleteReference:
    """An acknowledgement; the message row goes when its last reference does."""

    queue: str
    message_id: int


@dataclass(slots=True)
class SetDeliveryCount:
    queue: str
    message_id: int
    delivery_count: int


# Retention, analytics and duplicate detection: written alongside the message operations.


@dataclass(frozen=True, slots=True)
class RetainMessage:
    """A copy of an accepted message kept for `retention_days` (analysis, replay), whatever
    consumers do with the message itself. `message.address` is the address it was sent to and
    `message.arrival` when the broker accepted it."""

    message: MessageRecord


@dataclass(frozen=True, slots=True)
class RecordAcknowledged:
    """A consumer acknowledged a retained message (end-to-end latency analysis)."""

    message_id: int
    queue: str
    at: int  # epoch ms


@dataclass(frozen=True, slots=True)
class RecordDeadLetter:
    """A message went to a dead-letter address (counts by original address and reason)."""

    message_id: int
    original_address: str
    queue: str
    reason: str  # rejected | max-delivery-attempts | forward-hops
    at: int  # epoch ms


@dataclass(frozen=True, slots=True)
class RememberDuplicateId:
    """`_AMQ_DUPL_ID` seen on `address`; the store keeps the newest `keep` per address."""

    address: str
    duplicate_id: str
    keep: int


# Prepared transactions (XA): a branch the client prepared survives a restart until it is
# committed or rolled back (the coordinator's decision may come from a later connection).


@dataclass(frozen=True, slots=True)
class PreparedRecord:
    """A prepared branch as stored: its durable held sends (each message with the names of its
    durable queues) and its acknowledgements (queue, message id). The messages are kept in the
    record, not in `messages`, so they are on no queue until the commit stores them there; the
    acknowledged references stay stored on their queues until the commit deletes them."""

    xid: bytes  # the adapter's encoding of the branch's id, opaque here
    sends: tuple[tuple[MessageRecord, tuple[str, ...]], ...] = ()
    acks: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PrepareTransaction:
    branch: PreparedRecord


@dataclass(frozen=True, slots=True)
class ForgetTransaction:
    """The branch was committed (in the same unit as its messages) or rolled back."""

    xid: bytes


Operation = (
    PutAddress | DeleteAddress | PutQueue | DeleteQueue | AddMessage | AddReference
    | DeleteReference | SetDeliveryCount | RetainMessage | RecordAcknowledged | RecordDeadLetter
    | RememberDuplicateId | PrepareTransaction | ForgetTransaction
)


@dataclass(slots=True)
class StoredReference:
    """One message on one queue, as recovery or a page read returns it."""

    message: MessageRecord
    delivery_count: int


@dataclass(slots=True)
class Recovered:
    addresses: list[AddressRecord]
    queues: list[QueueRecord]
    # queue name -> its references in queue order (ascending message id)
    references: dict[str, list[StoredReference]]
    next_message_id: int
    # address -> duplicate ids remembered for it, oldest first
    duplicate_ids: dict[str, list[str]] = field(default_factory=dict)
    # queues with more references in the store than `references` holds (read by paging)
    more: frozenset[str] = frozenset()
    # prepared transaction branches, restored by the adapter that knows their ids
    prepared: list[PreparedRecord] = field(default_factory=list)


class Journal(Protocol):
    """Persistence, asynchronous: no method blocks the reactor thread on the database."""

    durable: bool  # False for the in-memory journal: the core then skips building records

    def recover(self) -> Recovered:
        """Called once at start, before serving (may block: nothing else runs yet)."""

    def submit(self, ops: Sequence[Operation], done: Callable[[BaseException | None], None] | None) -> None:
        """Queue a unit of work; `done(None)` on the reactor thread once committed, or
        `done(error)` if it could not be (nothing of the unit was applied)."""

    def read_page(self, queue: str, after_message_id: int, limit: int,
                  done: Callable[[list[StoredReference] | BaseException], None]) -> None:
        """Read up to `limit` references of `queue` with message id > after_message_id, in order;
        `done(error)` if the store could not (the caller tries again later)."""

    def close(self) -> None:
        """Finish every submitted unit (calling its `done`), then release the database."""

    def problem(self) -> str | None:
        """None while the store answers; else one line saying why it does not (`/health` and
        `hermod_store_up` report it)."""


@runtime_checkable
class UnitsOfParts(Protocol):
    """An optional extension of `Journal` (the SQL journal has it): a unit that more parts may
    join while it is the last unit submitted in the reactor turn, so that a producer link's
    sends of one turn are stored and completed together (`core/bursts.py`). A journal
    without it (the in-memory one, test doubles) gets a unit per send."""

    def open_unit(self, ops: list[Operation], done: Callable[[Any], None]) -> object:
        """`submit` a unit of parts (`ops` its first part's, kept as its own list); the handle
        `add_part` takes. `done(outcome)`: None when every part is stored, an error when none
        is, or a list of one outcome per part after a part's own fault."""

    def add_part(self, unit: Any, ops: Sequence[Operation]) -> bool:
        """One more part of `unit`, if it is still the last unit of the turn and not too big;
        False (nothing done): the caller opens a new unit."""


class ConsumerLink(Protocol):
    """What the core's dispatch asks of a link taking messages from a queue (`Consumer.link`):
    write one message to the peer; the adapter keeps `Consumer.credit` and `blocked` in step."""

    def send(self, consumer: Any, ref: Any) -> None: ...


class RunSender(ConsumerLink, Protocol):
    """An optional extension of `ConsumerLink` (the AMQP consumer link has it): write a run of
    messages in one call, returning how many were written (fewer when the consumer became
    blocked). Dispatch looks for `send_run` on the link each pass (a link may be swapped for
    a stand-in when it goes) and writes one message a call without it (`dispatch._SendEach`)."""

    def send_run(self, consumer: Any, run: list) -> int: ...


class Spool(Protocol):
    """Where the page policy keeps the paged messages of queues that store nothing (non-durable
    queues, or every queue with the in-memory store): out of memory, first in first out, and
    gone with the broker, as such messages are. Local and quick, so it is called directly."""

    def append(self, queue: str, ref: StoredReference) -> None:
        """Keep one more message of `queue`, after the others."""

    def read(self, queue: str, limit: int) -> list[StoredReference]:
        """Take up to `limit` of the oldest messages kept for `queue` (they are gone from here).
        Raises OSError (nothing taken) when the files cannot be read; `append` raises OSError
        (nothing kept) when they cannot be written."""

    def drop(self, queue: str) -> None:
        """Forget every message kept for `queue` (it was deleted)."""

    def close(self) -> None:
        """Forget everything (the broker stops)."""


class Clock(Protocol):
    def now_ms(self) -> int: ...


# ---------------------------------------------------------------------------------------------
# Inner ports: what the post office's satellites need from their host (the `PostOffice`
# implements them). Each lists exactly the members its module uses, so a satellite can be read,
# tested and changed without the whole post office in mind.

Done = Callable[[BaseException | None], None]


class QueueHost(Protocol):
    """What a `Queue` needs from the post office that holds it."""

    @property
    def journal(self) -> Journal: ...  # its durable references, page reads
    @property
    def spool(self) -> Spool | None: ...  # paged messages of queues that store nothing
    @property
    def clock(self) -> Clock: ...
    @property
    def flow(self) -> FlowControl: ...  # memory accounting; paging in waits for room
    @property
    def lingering(self) -> Lingering: ...  # a returning consumer stops a kept queue's countdown
    @property
    def delivery_latency(self) -> LatencyHistogram: ...  # arrival to acknowledgement
    @property
    def retaining(self) -> bool: ...  # some address retains (acknowledgements are recorded)
    @property
    def message_from_record(self) -> Callable[[MessageRecord], Message] | None: ...  # page reads
    @property
    def compile_filter(self) -> Callable[[str], Callable[[Message], bool]] | None: ...

    def call_at(self, at_ms: int, fn: Callable[[], None]): ...
    def schedule(self, queue: Queue) -> None: ...  # dispatch this queue in this reactor turn
    def next_message_id(self) -> int: ...  # a modified outcome's new message version
    def message_record(self, message: Message) -> MessageRecord: ...
    def settings_for(self, address: str) -> AddressSettings: ...
    def retains(self, address_name: str) -> bool: ...  # a message sent there is retained
    def queue_idle_check(self, queue: Queue) -> None: ...  # auto-delete when it went idle
    def persist_queue(self, queue: Queue) -> None: ...  # its attributes changed
    def dead_letter(self, ref: Ref, reason: str, done: Done | None = None,
                    annotations: dict | None = None) -> None: ...
    def expire(self, ref: Ref) -> None: ...


class FlowHost(Protocol):
    """What `FlowControl` needs from the post office: the addresses (their sizes and limits),
    their settings (the policy), where paged messages can go, and the reactor's `defer`."""

    @property
    def addresses(self) -> Mapping[str, Address]: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def spool(self) -> Spool | None: ...

    def settings_for(self, address: str) -> AddressSettings: ...
    def defer(self, fn: Callable[[], None]) -> None: ...


class LingeringHost(Protocol):
    """What `Lingering` (terminus expiry countdowns) needs: the time, a timer, the queues by
    name, and deleting one whose countdown ran out."""

    @property
    def clock(self) -> Clock: ...
    @property
    def queues(self) -> Mapping[str, Queue]: ...

    def call_at(self, at_ms: int, fn: Callable[[], None]): ...
    def delete_queue(self, name: str) -> None: ...


class CopyHost(Protocol):
    """What copies of a message into another address (`copies.py`: dead letters, expiry) need
    from the post office: the settings naming the target, the codec's `annotate`, routing and
    committing the copy, and auto-creating the target's queue."""

    @property
    def clock(self) -> Clock: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def annotate(self) -> Callable[..., Message] | None: ...
    @property
    def copy_heads(self) -> Callable[..., Callable[[str], tuple]] | None: ...
    @property
    def addresses(self) -> Mapping[str, Address]: ...
    @property
    def queues(self) -> Mapping[str, Queue]: ...  # the periodic expiry scan

    def settings_for(self, address: str) -> AddressSettings: ...
    def next_message_id(self) -> int: ...
    def create_queue(self, name: str, address_name: str, routing_type: str = ..., *,
                     durable: bool = True, purpose: str = ...) -> Queue: ...
    def route(self, message: Message, address_name: str, routing_type: str | None,
              queue_name: str | None = None) -> Plan: ...
    def post(self, plan: Plan, done: Done | None = None, extra_ops: list | None = None,
             accepted: bool = True) -> None: ...
    def queue_idle_check(self, queue: Queue) -> None: ...


class RemoteQueues(Protocol):
    """Cluster mode ([ha] mode = "cluster"): the queues another node owns. Every queue this node
    knows is routed to as usual (a plan names it), but a queue owned elsewhere is never stored
    here: `PostOffice.post` hands its part of the plan to `forward`, the "enqueue" of a remote
    queue binding (Artemis's RemoteQueueBinding). So every way a message is stored (a client's
    send, composite parts, transactions, management send, move and retry, dead-letter and expiry
    copies, diverts) forwards without code of its own. The cluster module implements it; the
    core never imports it."""

    def elsewhere(self, queue: Queue) -> bool:
        """Is `queue` owned by another node (reachable or not)? Asked per queue of a plan."""
        ...

    def forward(self, message: Message, queue: Queue, done: Done) -> None:
        """Store `message` on `queue` at its owner; `done(None)` once the owner accepted it,
        `done(error)` when it refused or cannot be reached (the send is then refused)."""
        ...
