"""The OpenWire form of a message an OpenWire producer sent, kept beside its stored (AMQP) form
on the core's message (`core.message.Message.native`, memory only) so that an OpenWire consumer
is given the producer's own fields without decoding and re-mapping the stored form, and a message
dispatched to several OpenWire consumers (a topic's subscribers) is marshalled once per wire
format (engine.Premarshalled), its redelivery counter patched per delivery."""
from __future__ import annotations

from typing import Any

from ...mapping import openwire as mapping
from ...openwire import model
from ...openwire.engine import Marshaller, Premarshalled

#: Bodies up to this size keep the producer's message in memory beside the stored form; larger
#: ones, whose copies would cost more memory than their mapping costs time, are mapped from the
#: stored form at each dispatch.
NATIVE_MAX = 8 * 1024
MAX_FORMS = 4  # wire formats (version, cache setting) kept per message


class Native:
    __slots__ = ("sent", "forms")

    def __init__(self, sent: model.Message) -> None:
        self.sent = sent
        self.forms: dict[tuple[int, bool, int], Premarshalled] = {}

    def message(self, stored: Any, count: int) -> model.Message:
        """The message a consumer is given for the core's message `stored`, at redelivery `count`."""
        msg = mapping.from_native(self.sent, stored.id, count)
        msg.arrival = msg.broker_in_time = stored.arrival
        return msg

    def premarshalled(self, marshaller: Marshaller, stored: Any, count: int) -> Premarshalled:
        """The same, marshalled for `marshaller`'s wire format (tight encoding only)."""
        key = (marshaller.version, marshaller.cache, stored.id)
        pre = self.forms.get(key)
        if pre is None:
            pre = marshaller.premarshal(self.message(stored, 0))
            if len(self.forms) < MAX_FORMS:
                self.forms[key] = pre
        return pre.redelivered(count)


def keep(msg: model.Message, parts: int) -> Native | None:
    """What to keep for a message sent to `parts` destinations (a composite is mapped per part)."""
    if parts == 1 and len(msg.content or b"") <= NATIVE_MAX:
        return Native(msg)
    return None


__all__ = ["NATIVE_MAX", "Native", "keep"]
