"""Moving a message off its queue to another address as a new copy: dead letters (rejected,
too many delivery attempts) and expiry. The removal and the copy are one journal unit; the copy
carries the `x-opt-ORIG-*` annotations and never expires. Hermod creates the target address
with an anycast queue of its name on first use (Artemis drops such messages unless those
resources exist); with no target configured the message is dropped.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from . import ports
from .forwarding import orig_annotations
from .address import QueuePurpose
from .message import ANYCAST, Message

if TYPE_CHECKING:
    from .consumer import Ref
    from .postoffice import Plan, PostOffice

log = logging.getLogger("hermod.core")

Done = Callable[[BaseException | None], None]


def dead_letter(po: PostOffice, ref: Ref, reason: str, done: Done | None = None) -> None:
    settings = po.settings_for(ref.queue.address.name)
    _move(po, ref, settings.dead_letter_address, {}, f"dead-lettered ({reason})", done, reason)


def expire(po: PostOffice, ref: Ref) -> None:
    """An expired message goes with `x-opt-ACTUAL-EXPIRY`; it is never delivered."""
    settings = po.settings_for(ref.queue.address.name)
    _move(po, ref, settings.expiry_address, {"x-opt-ACTUAL-EXPIRY": po.clock.now_ms()}, "expired", None, None)


def expire_scan(po: PostOffice) -> int:
    """Move every expired waiting message out (the periodic scan)."""
    now = po.clock.now_ms()
    moved = 0
    for q in list(po.queues.values()):
        if q.deleted:
            continue
        try:
            moved += q.expire_due(now)
        except Exception:  # noqa: BLE001 - one queue's fault must not stop the scan of the rest
            log.exception("expiry scan failed on queue %s", q.name)
    return moved


def _move(po: PostOffice, ref: Ref, target: str, extra: dict, what: str, done: Done | None,
          reason: str | None) -> None:
    queue = ref.queue
    plan: Plan = []
    moved = plan_copy(po, ref.message, queue.name, target, extra, plan)  # may fail: ref untouched
    queue.take(ref)
    log.info("%s message %s from %s to %s", what, ref.message.id, queue.name, moved or "nowhere (dropped)")
    removed: list[ports.Operation] = [ports.DeleteReference(queue.name, ref.message.id)] if ref.durable else []
    if reason is not None and po.journal.durable:
        removed.append(ports.RecordDeadLetter(ref.message.id, ref.message.address, queue.name,
                                              reason, po.clock.now_ms()))
    po.post(plan, done, removed, accepted=False)
    po.queue_idle_check(queue)


def plan_copy(po: PostOffice, message: Message, via: str, target: str, extra: dict, plan: Plan) -> str | None:
    """Add a copy of `message` routed to `target` to `plan`; returns the target (None: dropped)."""
    if not target or po.annotate is None or target == message.address:
        return None
    annotations = orig_annotations(message, via)
    annotations.update(extra)
    copy = po.annotate(message, annotations, target, True)  # such copies never expire
    copy.id = po.next_message_id()
    address = po.addresses.get(target)
    if address is None or not address.queues:
        po.create_queue(target, target, ANYCAST, durable=True, purpose=QueuePurpose.DEAD_LETTER)
    plan.extend(po.route(copy, target, None))
    return target
