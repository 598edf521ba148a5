"""Operations on the messages of a queue: peek, purge, move, retry, and sending a message.

Only messages in memory are seen (a queue that pages keeps the rest in the store until its
consumers drain it). Move and retry are new sends to the target: the copies are routed there
and the originals' removal is part of the same journal unit, so a message leaves this queue
only once it is stored there; if the store fails, the originals go back.
"""
from __future__ import annotations

import itertools
import json
from typing import Any, Callable

from ..core import errors as core_errors, ports as core_ports
from ..core.address import split_fqqn
from ..core.copies import orig_annotations
from ..core.message import ANYCAST, MULTICAST, Message
from ..core.queue import Queue, Ref
from .errors import BadRequest, NotFound
from .ports import Deferred, MessageCodec
from .render import jsonable

DEFAULT_PEEK = 100
MAX_PEEK = 10_000
PEEK_BODY_BYTES = 64 * 1024  # a body longer than this is cut (`"body_truncated": true`)
PEEK_ANSWER_BYTES = 16 * 1024 * 1024  # the list ends before the row that would pass this
PEEK_SLICE_BYTES = 512 * 1024  # of rows written per turn of the event loop


def find_queue(po, name: str) -> Queue:
    """A queue by its name or its fully qualified `address::queue` name."""
    if not isinstance(name, str) or not name:
        raise BadRequest("a queue name is required")
    address, queue_name = split_fqqn(name)
    queue = po.queues.get(queue_name if queue_name is not None else name)
    if queue is None or (queue_name is not None and queue.address.name != address):
        raise NotFound(f"queue {name} does not exist")
    return queue


def named_address(name: str) -> str:
    """The address a queue name speaks of: that of `address::queue`, else the name itself."""
    address, queue_name = split_fqqn(name)
    return address if queue_name is not None else name


def compile_predicate(po, text: Any) -> Callable[[Message], bool] | None:
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise BadRequest("filter must be a string")
    try:
        return po.compile_filter(text)
    except core_errors.InvalidFilter as e:
        raise BadRequest(str(e)) from None


def _ref_predicate(match: Callable[[Message], bool] | None) -> Callable[[Ref], bool]:
    if match is None:
        return lambda ref: True
    return lambda ref: bool(match(ref.message))


# -- peek -------------------------------------------------------------------------------------------


def peek(po, codec: MessageCodec, queue: Queue, limit: int, match) -> Deferred:
    """Queue order, non-destructive: those out with consumers first (they were ahead), then the
    waiting ones by priority and arrival, then the scheduled ones. O(limit) past the filter.

    Bounded (contract, the peek row): each body cut to PEEK_BODY_BYTES (`body_truncated`), the
    list ended before the message that would take the answer past PEEK_ANSWER_BYTES. The refs
    are taken at once; the rows are written in slices of about PEEK_SLICE_BYTES of JSON, each
    a separate turn of the event loop (`po.defer`), so a peek of big messages never holds up
    AMQP traffic for more than one slice. Answers a `Peeked` list (its JSON text written)."""
    if not 0 < limit <= MAX_PEEK:
        raise BadRequest(f"limit must be 1-{MAX_PEEK}")
    delivering = sorted(ref for c in queue.consumers for ref in c.in_flight)
    refs = itertools.chain(delivering, iter(queue.backlog), (r for r in sorted(queue.scheduled)))
    if match is not None:
        refs = (r for r in refs if match(r.message))
    taken = list(itertools.islice(refs, limit))
    answer = Deferred()
    rows = Peeked()
    texts: list[str] = []
    size = 2  # the brackets

    def write_slice(start: int) -> None:
        nonlocal size
        written = 0
        for i in range(start, len(taken)):
            if written >= PEEK_SLICE_BYTES:
                po.defer(lambda: write_slice(i))
                return
            row = describe(codec, taken[i])
            text = json.dumps(row)
            if size + len(text) + (1 if texts else 0) > PEEK_ANSWER_BYTES:
                break
            size += len(text) + (1 if texts else 0)
            rows.append(row)
            texts.append(text)
            written += len(text)
        rows.json_text = "[" + ",".join(texts) + "]"
        answer.resolve(rows)
    write_slice(0)
    return answer


class Peeked(list):
    """A peek's rows with the JSON text they were measured by (`json_text`), which a door
    sends as it is instead of encoding the rows again."""
    json_text = "[]"


def describe(codec: MessageCodec, ref: Ref) -> dict:
    message = ref.message
    _front, base, bare_at = message.parts()  # the body where it lies: no join of a shared copy
    body, encoding, truncated = codec.bounded_body(memoryview(base)[bare_at:], PEEK_BODY_BYTES)
    properties = message.properties
    return {"id": message.id, "message_id": jsonable(properties.get("message_id")),
            "address": message.address, "durable": message.durable, "priority": message.priority,
            "delivery_count": ref.delivery_count, "delivering": ref.consumer is not None,
            "properties": jsonable(message.application_properties),
            "annotations": jsonable(message.annotations),
            "amqp_properties": jsonable(properties),
            "body": body, "body_encoding": encoding, "body_truncated": truncated}


# -- purge ------------------------------------------------------------------------------------------


def purge(po, queue: Queue, match) -> Deferred:
    """Remove every waiting message (that matches): not dead-lettered, not counted as acked.
    Answered `{"removed": N}` once the store has the removals, so purged messages stay purged
    after a crash."""
    taken = queue.take_waiting(_ref_predicate(match))
    ops = [core_ports.DeleteReference(queue.name, r.message.id) for r in taken if r.durable]
    answer = Deferred()
    removed = {"removed": len(taken)}
    if ops:
        po.journal.submit(ops, lambda error: answer.resolve(removed, error))
    else:
        answer.resolve(removed)
    return answer


# -- move and retry ---------------------------------------------------------------------------------


def move(po, queue: Queue, to: Any, match) -> Deferred:
    if not isinstance(to, str) or not to:
        raise BadRequest("'to' (the target address) is required")
    if to not in po.addresses:
        raise NotFound(f"address {to} does not exist")
    taken = queue.take_waiting(_ref_predicate(match))

    def target(ref: Ref) -> tuple[Message, str, str | None]:
        copy = po.annotate(ref.message, orig_annotations(ref.message, queue.name), to)
        return copy, to, None
    return _resend(po, queue, taken, target)


def original_address(ref: Ref) -> str | None:
    """Where a dead letter came from (`x-opt-ORIG-ADDRESS`), or None."""
    address = ref.message.annotations.get("x-opt-ORIG-ADDRESS")
    return address if isinstance(address, str) and address else None


def retry_targets(queue: Queue) -> set[str]:
    """Every address `retry` would write to: those its messages came from (management checks
    `send` on each before anything moves)."""
    return {a for r in itertools.chain(queue.backlog, queue.scheduled) if (a := original_address(r))}


def retry(po, queue: Queue) -> Deferred:
    """Dead letters back where they came from: the queue named by `x-opt-ORIG-QUEUE` when it is
    still on the `x-opt-ORIG-ADDRESS` address (so one subscriber of a topic does not get a copy
    for every other), else that address. Messages without the annotation stay."""
    # A new send there: an auto-created address (and anycast queue) that went away while its
    # messages sat here comes back, when the settings allow, as it would for a producer.
    for address in retry_targets(queue):
        if address not in po.addresses:
            try:
                po.ensure_send_target(address, po.resolve_send_routing_type(address, None))
            except core_errors.HermodError:
                continue  # stays here

    def original(ref: Ref) -> bool:
        address = original_address(ref)
        return address is not None and address in po.addresses

    taken = queue.take_waiting(original)

    def target(ref: Ref) -> tuple[Message, str, str | None]:
        annotations = ref.message.annotations
        address = annotations["x-opt-ORIG-ADDRESS"]
        via = annotations.get("x-opt-ORIG-QUEUE")
        copy = po.annotate(ref.message, {}, address)
        on_address = po.addresses[address].queues
        return copy, address, via if isinstance(via, str) and via in on_address else None
    return _resend(po, queue, taken, target)


def _resend(po, queue: Queue, taken: list[Ref], target) -> Deferred:
    answer = Deferred()
    if not taken:
        answer.resolve({"moved": 0})
        return answer
    plan: list = []
    removed = []
    for ref in taken:
        copy, address, queue_name = target(ref)
        copy.id = po.next_message_id()
        plan.extend(po.route(copy, address, None, queue_name))
        if ref.durable:
            removed.append(core_ports.DeleteReference(queue.name, ref.message.id))

    def stored(error: BaseException | None) -> None:
        if error is not None:
            for ref in taken:  # still in the store here: back on the queue, in order
                ref.delivery_count += 1  # put_back counts a failed ack's attempt off again
                queue.put_back(ref, acked=False)
            answer.resolve(None, error)
        else:
            answer.resolve({"moved": len(taken)})
    po.post(plan, stored, removed, accepted=False)
    return answer


# -- send -----------------------------------------------------------------------------------------


def send(po, codec: MessageCodec, address: Any, body: Any, properties: Any, durable: Any,
         routing_type: Any) -> Deferred:
    if not isinstance(address, str) or not address:
        raise BadRequest("an address is required")
    if address not in po.addresses:
        raise NotFound(f"address {address} does not exist")
    if properties is None:
        properties = {}
    if not isinstance(properties, dict) or not all(isinstance(k, str) for k in properties):
        raise BadRequest("properties must be an object")
    if routing_type not in (None, ANYCAST, MULTICAST):
        raise BadRequest("routing_type must be anycast or multicast")
    if not isinstance(body, (str, type(None))):
        raise BadRequest("body must be a string")
    rt = po.resolve_send_routing_type(address, routing_type)
    message = codec.new_message(address, body or "", properties, bool(durable), rt, po.clock.now_ms())
    plan = po.route(message, address, rt)
    routed_to = [q.name for _m, queues in plan for q in queues]
    answer = Deferred()
    po.post(plan, lambda error: answer.resolve({"routed_to": routed_to}, error))
    return answer
