"""Management: one implementation of the management operations for all three doors (the AMQP
endpoint `hermod.management`, the HTTP API, the CLI). Pure: no Proton, no SQL, no HTTP; it uses
the core's public API, and two small ports the protocol adapter fills (`ports.py`).

`call(operation, requester, args, caller)` answers a JSON-able value, or a `Deferred` for the
operations that wait for the store (move, retry, send); failures are `ManagementError`s carrying
an HTTP status. Every door hands in its `Caller` (access.py): each operation checks the
addresses it touches through the broker's one decision point and is audited here, so no door
checks or audits management on its own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .. import __version__
from ..core import errors as core_errors
from ..core import limits
from ..core.message import ANYCAST, MULTICAST
from . import definitions, inspect, messages
from .access import UNCHECKED, Access, Caller, audit_record
from .errors import BadRequest, Conflict, Forbidden, ManagementError, NotFound
from .explain import explain
from .ports import ConnectionRegistry, Deferred, MessageCodec, NoConnections
from .render import address_info, queue_info

View = Callable[[str], bool]  # may the caller see this address?

if TYPE_CHECKING:
    from ..app import Broker

__all__ = ["Management", "ManagementError", "Deferred", "Caller", "READ_OPERATIONS", "QUEUE_STAT_FIELDS"]

QUEUE_STAT_FIELDS = ("address", "queue", "routing_type", "durable", "messages", "consumers",
                     "added", "acked")

# Operations that only read: `browse` permission is enough for them; the rest need `manage`.
# Arguments that name an address or a queue: the contract's name limit applies to them at every
# door, before an operation looks anything up or creates it.
NAME_ARGUMENTS = ("name", "address", "to")

READ_OPERATIONS = frozenset({"queue.stat", "address.stat", "store.stat", "bridge.stat", "address.list", "queue.list",
                             "queue.page", "queue.get", "queue.browse", "connection.list", "explain", "overview",
                             "status", "queue.show", "divert.list", "subscription.list", "definitions.export"})


def _arg(args: dict, name: str, kind: type | tuple = str, default: Any = None, required: bool = False):
    value = args.get(name, default)
    if value is None:
        if required:
            raise BadRequest(f"'{name}' is required")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"'{name}' has the wrong type")
    return value


def _check_names(args: dict) -> None:
    """An address or queue name over the contract's limit is a 400 naming the limit."""
    for key in NAME_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str):
            try:
                limits.check_name(value, key)
            except core_errors.InvalidField as e:
                raise BadRequest(str(e)) from None


class Management:
    def __init__(self, broker: Broker, codec: MessageCodec | None = None):
        self.broker = broker
        self.codec = codec
        self.connections: ConnectionRegistry = NoConnections()

    @property
    def postoffice(self):
        return self.broker.postoffice

    def health(self) -> tuple[int, dict]:
        """`/health`: 200 `ok` while the broker serves; 503 `degraded` with the reason while the
        store does not answer (durable sends are then refused), so a load balancer or an
        orchestrator sees the truth."""
        problem = self.broker.journal.problem()
        if problem is not None:
            return 503, {"status": "degraded", "reason": problem}
        return 200, {"status": "ok"}

    # -- the statistics the AMQP endpoint always had (amqp-value answers) ----------------------------
    def queue_stats(self, requester: str | None = None, view: View | None = None) -> list[dict]:
        """A row per queue, leaving out `requester` (the temporary queue the reply goes to)."""
        rows = []
        for q in sorted(self.broker.postoffice.queues.values(), key=lambda q: (q.address.name, q.name)):
            if q.name == requester or (view is not None and not view(q.address.name)):
                continue
            rows.append({"address": q.address.name, "queue": q.name, "routing_type": q.routing_type,
                         "durable": q.durable, "messages": q.message_count,
                         "consumers": len(q.consumers), "added": q.added, "acked": q.acked,
                         "paged": max(q.paged, 0), "bytes_in_memory": q.size,
                         "no_consumer": q.purpose == "subscription" and not q.consumers})
        return rows

    def address_stats(self, requester: str | None = None, view: View | None = None) -> list[dict]:
        return [{"address": a.name, "routing_types": sorted(a.routing_types),
                 "queues": sorted(a.queues)} for a in sorted(self.broker.postoffice.addresses.values(),
                                                             key=lambda a: a.name)
                if a.name != requester and (view is None or view(a.name))]

    def store_stats(self, requester: str | None = None, view: View | None = None) -> dict:
        """Group commit figures of the store's journal (empty for the in-memory store)."""
        stats = getattr(self.broker.journal, "stats", None)
        if stats is None:
            return {}
        s = stats()
        return {"commits": s.commits, "units": s.units, "ops": s.ops,
                "avg_units_per_commit": round(s.avg_units_per_commit, 1),
                "max_units_per_commit": s.max_units_per_commit,
                "avg_ops_per_commit": round(s.avg_ops_per_commit, 1), "summary": s.summary()}

    def bridge_stats(self, requester: str | None = None, view: View | None = None) -> list[dict]:
        """A row per [[bridge]]: state (connecting, up, backoff, stopped), last error, backlog;
        with a `view`, only the bridges whose local queue's address the caller may see."""
        rows = [b.status() for b in self.broker.bridges]
        if view is None:
            return rows
        queues = self.broker.postoffice.queues
        return [r for r in rows if r["queue"] in queues and view(queues[r["queue"]].address.name)]

    def operations(self) -> dict:
        """The legacy statistics operations, called with the requester only."""
        return {"queue.stat": self.queue_stats, "address.stat": self.address_stats,
                "store.stat": self.store_stats, "bridge.stat": self.bridge_stats}

    def argument_operations(self) -> dict[str, Callable[[dict], Any]]:
        """The contract's operations, called with their arguments (a dict)."""
        return {
            "address.list": self.address_list, "queue.page": self.queue_page_answer, "address.create": self.address_create,
            "address.delete": self.address_delete, "message.send": self.message_send,
            "queue.list": self.queue_list, "queue.get": self.queue_get, "queue.create": self.queue_create,
            "queue.delete": self.queue_delete, "queue.purge": self.queue_purge,
            "queue.browse": self.queue_browse, "queue.move": self.queue_move,
            "queue.retry": self.queue_retry, "connection.list": self.connection_list,
            "connection.close": self.connection_close, "explain": self.explain,
            "overview": self.overview, "status": self.status, "queue.show": self.queue_show,
            "divert.list": self.divert_list, "subscription.list": self.subscription_list,
            "definitions.export": self.definitions_export, "definitions.import": self.definitions_import,
        }

    def call(self, operation: str, requester: str | None = None, args: dict | None = None,
             caller: Caller = UNCHECKED):
        """Run `operation` for `caller`: every address it touches is checked here, through the
        broker's one decision point (`broker.authorization`), whichever door the call came
        through; a refusal is `Forbidden` (403) naming the operation, the right and the address.
        Each call that passes its checks is one `management` audit record. `requester`: the
        AMQP reply address (left out of lists)."""
        legacy = self.operations().get(operation)
        op = self.argument_operations().get(operation)
        if legacy is None and op is None:
            raise KeyError(f"unknown management operation {operation!r}")
        access = Access(self.broker.authorization, caller, operation)
        args = dict(args or {})
        audited = dict(args)
        try:
            if legacy is not None:
                if operation == "store.stat":
                    access.require_broker_wide("browse")
                result = legacy(requester, access.view())
            else:
                args.update(requester=requester, view=access.view(), access=access)
                _check_names(args)
                result = op(args)
        except Forbidden:
            raise  # the decision point wrote the `denied` record
        except ManagementError:
            audit_record(self.broker.audit, caller, operation, audited)
            raise
        audit_record(self.broker.audit, caller, operation, audited)
        return result

    def reply_allowed(self, caller: Caller, reply_to: str) -> bool:
        """Whether the AMQP answer may be written to `reply_to`: a temporary address (the
        caller's reply queue), or one the caller may `send` to; an answer is a message, and
        naming another tenant's queue there must not put it into it."""
        address = self.postoffice.addresses.get(reply_to)
        if address is not None and address.temporary:
            return True
        try:
            Access(self.broker.authorization, caller, "reply").require("send", reply_to)
        except Forbidden:
            return False
        return True

    # -- addresses -------------------------------------------------------------------------------
    def address_list(self, args: dict) -> list[dict]:
        requester = args.get("requester")
        view = args.get("view")
        return [address_info(a) for a in sorted(self.postoffice.addresses.values(), key=lambda a: a.name)
                if a.name != requester and not a.temporary and (view is None or view(a.name))]

    def address_create(self, args: dict) -> Deferred:
        name = _arg(args, "name", required=True)
        _access(args).require("manage", name)
        routing_types = args.get("routing_types") or [ANYCAST]
        if isinstance(routing_types, str):
            routing_types = [t.strip() for t in routing_types.split(",") if t.strip()]
        if not isinstance(routing_types, list) or not routing_types or \
                not all(t in (ANYCAST, MULTICAST) for t in routing_types):
            raise BadRequest("routing_types must be a list of anycast/multicast")
        if name in self.postoffice.addresses:
            raise Conflict(f"address {name} already exists")
        answer = Deferred()
        created = self.postoffice.create_address(name, set(routing_types), stored=_answer(answer))
        return _answered(answer, lambda: address_info(created))

    def address_delete(self, args: dict) -> Deferred:
        name = _arg(args, "name", required=True)
        _access(args).require("manage", name)
        address = self.postoffice.addresses.get(name)
        if address is None:
            raise NotFound(f"address {name} does not exist")
        if address.queues:
            raise Conflict(f"address {name} has queues: {', '.join(sorted(address.queues))}")
        if address.bindings.all_diverts():
            raise Conflict(f"address {name} has diverts or composites: "
                           f"{', '.join(d.name for d in address.bindings.all_diverts())}")
        answer = Deferred()
        self.postoffice.delete_address(name, stored=_answer(answer))
        return answer

    # -- queues -----------------------------------------------------------------------------------
    def queue_list(self, args: dict) -> list[dict]:
        return self.queue_page(args)[0]

    def queue_page_answer(self, args: dict) -> dict:
        """`queue.page`: `{"queues": [...], "total": N}` (the console's pager; HTTP `GET
        /api/queues` with paging arguments answers the list and `X-Total-Count`)."""
        rows, total = self.queue_page(args)
        return {"queues": rows, "total": total}

    def queue_page(self, args: dict) -> tuple[list[dict], int]:
        """One page of the queue list and how many queues matched: optional `search` (a piece of
        the queue's or its address's name, any case), `sort` (`name`, the default, or `messages`:
        deepest first), `offset` and `limit`. Only the page is rendered, so a console polling
        one page of 10,000 queues costs a name scan and a sort, not 10,000 answers."""
        requester = args.get("requester")
        search = (_arg(args, "search") or "").lower()
        sort = _arg(args, "sort", default="name")
        if sort not in ("name", "messages"):
            raise BadRequest("sort must be name or messages")
        offset = _arg(args, "offset", int, default=0)
        limit = _arg(args, "limit", int)
        if offset < 0 or (limit is not None and limit < 0):
            raise BadRequest("offset and limit must not be negative")
        view = args.get("view")
        matched = [q for q in self.postoffice.queues.values() if q.name != requester and
                   (view is None or view(q.address.name)) and
                   (not search or search in q.name.lower() or search in q.address.name.lower())]
        if sort == "messages":
            matched.sort(key=lambda q: (-q.message_count, q.name))
        else:
            matched.sort(key=lambda q: q.name)
        page = matched[offset:] if limit is None else matched[offset:offset + limit]
        return [queue_info(q) for q in page], len(matched)

    def queue_get(self, args: dict) -> dict:
        return queue_info(self._readable_queue(args))

    def _readable_queue(self, args: dict):
        """The named queue, when the caller may `browse` its address (else 403)."""
        return self._queue_for(args, "browse")

    def _managed_queue(self, args: dict, *rights: str):
        """The named queue, when the caller holds `manage` (and `rights`) on its address."""
        return self._queue_for(args, "manage", *rights)

    def _queue_for(self, args: dict, *rights: str):
        """The named queue once the caller holds `rights` on its address (403 naming the first
        it lacks). A queue that does not exist is 404 only to a caller who holds them on the
        address its name gives (the address of `address::queue`, else the name itself, where
        a queue made by sending would live): anyone else gets the same 403 as for an existing
        queue, so an answer never tells a tenant which of another's queues exist."""
        try:
            queue = messages.find_queue(self.postoffice, args.get("name"))
        except NotFound:
            for right in rights:
                _access(args).require(right, messages.named_address(args["name"]))
            raise
        for right in rights:
            _access(args).require(right, queue.address.name)
        return queue

    def queue_create(self, args: dict) -> Deferred:
        name = _arg(args, "name", required=True)
        address = _arg(args, "address", default=name)
        routing_type = _arg(args, "routing_type", default=ANYCAST)
        if routing_type not in (ANYCAST, MULTICAST):
            raise BadRequest("routing_type must be anycast or multicast")
        durable = _arg(args, "durable", bool, default=True)
        filter_text = _arg(args, "filter") or None
        # Artemis's queue attributes (optional; what `definitions import` restores)
        max_consumers = _arg(args, "max_consumers", int, default=-1)
        exclusive = _arg(args, "exclusive", bool, default=False)
        last_value_key = _arg(args, "last_value_key") or None
        _access(args).require("manage", address)
        if name in self.postoffice.queues:
            raise Conflict(f"queue {name} already exists")
        messages.compile_predicate(self.postoffice, filter_text)  # a bad selector is a 400
        queue = self.postoffice.create_queue(name, address, routing_type, durable=durable,
                                             filter_text=filter_text, max_consumers=max_consumers,
                                             exclusive=exclusive, last_value_key=last_value_key)
        answer = Deferred()
        queue.when_persisted(lambda _queue, error: answer.resolve(None if error else queue_info(queue), error))
        return answer

    def queue_delete(self, args: dict) -> Deferred:
        queue = self._managed_queue(args, "delete_queue")
        answer = Deferred()
        self.postoffice.delete_queue(queue.name, stored=_answer(answer))
        return answer

    def queue_purge(self, args: dict) -> Deferred:
        queue = self._managed_queue(args)
        match = messages.compile_predicate(self.postoffice, args.get("filter"))
        return messages.purge(self.postoffice, queue, match)

    def queue_browse(self, args: dict) -> Deferred:
        queue = self._readable_queue(args)
        match = messages.compile_predicate(self.postoffice, args.get("filter"))
        limit = _arg(args, "limit", int, default=messages.DEFAULT_PEEK)
        return messages.peek(self.postoffice, self._codec(), queue, limit, match)

    def queue_move(self, args: dict) -> Deferred:
        queue = self._managed_queue(args)
        to = args.get("to")
        if isinstance(to, str) and to:
            _access(args).require("send", to)
        match = messages.compile_predicate(self.postoffice, args.get("filter"))
        return messages.move(self.postoffice, queue, to, match)

    def queue_retry(self, args: dict) -> Deferred:
        """Every address a dead letter would go back to is checked (`send`) before anything
        moves: one the caller may not write to refuses the whole call."""
        queue = self._managed_queue(args)
        for address in sorted(messages.retry_targets(queue)):
            _access(args).require("send", address)
            self._creation_rights(args, address)
        return messages.retry(self.postoffice, queue)

    def message_send(self, args: dict) -> Deferred:
        address = args.get("address")
        if isinstance(address, str) and address:
            _access(args).require("send", address)
        return messages.send(self.postoffice, self._codec(), args.get("address"), args.get("body"),
                             args.get("properties"), args.get("durable", False), args.get("routing_type"))

    def _creation_rights(self, args: dict, address: str, routing_type=None) -> None:
        """Retry to an address that went away creates it again, and an anycast one its durable
        queue, as a client's send would: the same rights (`create_address`,
        `create_durable_queue`), so management is no way around them. (Send and move answer
        404 for an address that does not exist.)"""
        po = self.postoffice
        if address in po.addresses:
            return
        access = _access(args)
        access.require("create_address", address)
        try:
            rt = po.resolve_send_routing_type(address, routing_type)
        except core_errors.HermodError:
            return  # auto-create is off there: the operation itself answers not found
        if rt == ANYCAST:
            access.require("create_durable_queue", address)

    # -- connections -------------------------------------------------------------------------------
    def connection_list(self, args: dict) -> list[dict]:
        _access(args).require_broker_wide("browse")
        return self.connections.list_connections()

    def connection_close(self, args: dict) -> None:
        connection_id = args.get("id")
        if not isinstance(connection_id, (str, int)) or isinstance(connection_id, bool):
            raise BadRequest("'id' is required")
        _access(args).require_broker_wide("manage")
        if not self.connections.close_connection(str(connection_id)):
            raise NotFound(f"connection {connection_id} does not exist")

    # -- overview ------------------------------------------------------------------------------------
    def overview(self, args: dict) -> dict:
        """The console's first page: totals, in one pass over the queues (those the caller may
        see); the connection count only for a broker-wide reader (else null)."""
        view = args.get("view")
        connections = self.connections.figures().get("connections", 0) \
            if _access(args).broker_wide("browse") else None
        queues = [q for q in self.postoffice.queues.values() if view is None or view(q.address.name)]
        return {"version": __version__, "node": inspect.node_name(self.broker.config),
                "addresses": sum(1 for a in self.postoffice.addresses.values()
                                 if not a.temporary and (view is None or view(a.name))),
                "queues": len(queues), "messages": sum(q.message_count for q in queues),
                "consumers": sum(len(q.consumers) for q in queues),
                "connections": connections}

    # -- the operator's views (inspect.py) and definitions (definitions.py) ------------------------------
    def status(self, args: dict) -> dict:
        """`hermod status`: the broker-wide parts (listeners, connections, memory) only for a
        broker-wide reader."""
        return inspect.status(self.broker, self.connections, args.get("view"), _access(args).broker_wide("browse"))

    def queue_show(self, args: dict) -> dict:
        """Each consumer's connection (remote address, user, container id) only for a reader of
        the connection list, a broker-wide one, as `connection.list` needs."""
        queue = self._readable_queue(args)
        return inspect.queue_show(queue, self.connections if _access(args).broker_wide("browse") else None)

    def divert_list(self, args: dict) -> list[dict]:
        return inspect.divert_list(self.broker, args.get("view"))

    def subscription_list(self, args: dict) -> list[dict]:
        return inspect.subscription_list(self.broker, args.get("view"))

    def definitions_export(self, args: dict) -> dict:
        return definitions.export(self.broker, args.get("view"))

    def definitions_import(self, args: dict) -> Deferred:
        """Every address the document names is checked (`manage`) before anything is made: one
        the caller may not manage refuses the whole import."""
        parsed = definitions.parse(args.get("definitions"))
        for address in definitions.touched(parsed):
            _access(args).require("manage", address)
        return definitions.Importer(self.broker, lambda text: messages.compile_predicate(self.postoffice, text)) \
            .run(parsed)

    # -- explain -------------------------------------------------------------------------------------
    def explain(self, args: dict) -> dict:
        address = _arg(args, "address", required=True)
        routing_type = _arg(args, "routing_type")
        if routing_type not in (None, ANYCAST, MULTICAST):
            raise BadRequest("routing_type must be anycast or multicast")
        address, fqqn, queue = address.partition("::")  # `address::queue`: to that queue alone
        if fqqn and not (address and queue):
            raise BadRequest("a fully qualified queue name is address::queue")
        _access(args).require("browse", address)
        properties = args.get("properties") or {}
        if not isinstance(properties, dict):
            raise BadRequest("properties must be an object")
        po = self.postoffice
        rt = po.resolve_send_routing_type(address, routing_type)
        message = self._codec().new_message(address, "", properties, False, rt, po.clock.now_ms())
        try:
            return explain(po, self.broker.virtual_topics, message, address, rt, args.get("view"), queue or None)
        except core_errors.HermodError as e:
            raise BadRequest(str(e)) from None

    # -- metrics ---------------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        from .metrics import render
        return render(self.broker, self.connections.figures())

    def metrics_snapshot(self, caller: Caller = UNCHECKED):
        """The figures of one scrape, read now; `metrics.text(snapshot)` formats them anywhere.
        A broker-wide read: `browse` from an entry with `match = "#"` (else Forbidden)."""
        Access(self.broker.authorization, caller, "metrics").require_broker_wide("browse")
        from .metrics import Snapshot
        return Snapshot(self.broker, self.connections.figures())

    def _codec(self) -> MessageCodec:
        if self.codec is None:
            raise ManagementError("no message codec registered")
        return self.codec


def _access(args: dict) -> Access:
    """The call's checks (`call` puts them in the arguments; a direct call is unchecked)."""
    return args.get("access") or Access(None, UNCHECKED, "internal")


# -- answers once stored ---------------------------------------------------------------------------
# Creating and deleting addresses and queues, and purging one, answer once the store has the
# change (Artemis answers once its journal has it): the answer then survives a crash. While the
# store is away the answer waits; a store that gives up is a 503, "store failed: ...".


def _answer(answer: Deferred):
    """A store callback (`Done`) that resolves `answer` with nothing, or with the store's error."""
    return lambda error: answer.resolve(None, error)


def _answered(answer: Deferred, value: Callable[[], Any]) -> Deferred:
    """`answer` with the value `value()` gives once stored (what the thing looks like then).
    `address_create` needs the second step: the memory store calls back inside
    `create_address`, before the address it returns exists here."""
    result = Deferred()
    answer.then(lambda _ignored, error: result.resolve(None if error else value(), error))
    return result
