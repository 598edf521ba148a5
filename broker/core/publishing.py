"""Publishing one message, for every protocol adapter but AMQP's hot path: the same steps
`ProducerLink._send_to` takes inline (address full policy, route, refusal of a send whose target
went, the full policy of every destination of a plan with copies, the transaction, the commit),
written once for OpenWire, STOMP and MQTT.

The adapter has already checked `send` on the address (`Broker.relay_target` inside
`Broker.acting_as(principal)`: the one authorization decision, cached per address) and built
the `Message` (its encoded AMQP sections from `broker.mapping`). It learns the outcome from
`done(error)`: None once the message may be acknowledged to its producer (stored wherever it
must be), else a core error it turns into its own refusal (`errors.ResourceLimitExceeded`: full
under the `fail` policy; `errors.QueueNotFound`: its target went; an `OSError`-like store error:
the store refused). `block` is not decided here: a producer asks `blocked(po, address)` before
it reads more from its socket and waits with `FlowControl.wait` (as AMQP withholds credit).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .errors import QueueNotFound, ResourceLimitExceeded
from .flow import BLOCK, DROP, FAIL

if TYPE_CHECKING:
    from .message import Message
    from .postoffice import PostOffice
    from .transactions import Transaction

Done = Callable[[BaseException | None], None]


def blocked(po: PostOffice, address: str | None) -> bool:
    """Must a producer of `address` (None: any address, the broker's memory) stop reading until
    `po.flow.wait(key, resume)` calls it back? The `block` policy, or the memory limit."""
    return po.flow.verdict(address) == BLOCK


def publish(po: PostOffice, message: Message, done: Done, queue: str | None = None,
            txn: Transaction | None = None) -> None:
    """Route `message` to `message.address` (routing type `message.routing_type`; `queue`: an
    FQQN's queue) and commit the plan: at once when nothing is to be stored, else through the
    journal; inside `txn` the plan is held for its commit and `done(None)` is called at once.
    `done` is called exactly once."""
    address, rt = message.address, message.routing_type
    verdict = po.flow.verdict(address)
    if verdict == FAIL:
        done(ResourceLimitExceeded(f"Address is full: {address}"))
        return
    if verdict == DROP:  # accepted and dropped, as the policy says
        done(None)
        return
    plan = po.route(message, address, rt, queue)
    refused = None if plan and plan[0][1] else po.unrouted(plan, address, rt, queue)
    if refused is not None:
        done(QueueNotFound(refused))
        return
    if len(plan) > 1:  # copies: each destination's own policy
        full = po.admit(plan)
        if full is not None:
            done(ResourceLimitExceeded(f"Address is full: {full}"))
            return
    if txn is not None:
        txn.add_send(plan)
        done(None)
        return
    if po.post_now(plan):
        done(None)
        return
    po.post(plan, done)


__all__ = ["blocked", "publish"]
