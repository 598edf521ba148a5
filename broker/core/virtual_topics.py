"""ActiveMQ Classic virtual topics on the Artemis address model.

A consumer on `Consumer.A.VirtualTopic.Orders` (prefix `Consumer.*.` with group `A`, topic
`VirtualTopic.Orders`) gets a durable, shared multicast queue of that name bound to the topic's
address. Multicast routing then gives every group's queue one copy, load-balanced among the
group's consumers, and plain topic subscribers still get theirs. Like Classic, the queue keeps
collecting while its consumers are away (it is never auto-deleted).

`selector_aware`: a group's queue takes a message only when one of its current consumers'
selectors matches (a consumer with no selector matches everything). With `selector_cache`
the selectors are remembered (persisted with the queue) so that the queue keeps collecting
matching messages while its consumers are away.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from .wildcards import matches


@dataclass(frozen=True)
class VirtualTopic:
    name: str = "VirtualTopic.>"  # which topics are virtual (wildcard pattern)
    prefix: str = "Consumer.*."
    postfix: str = ""
    selector_aware: bool = False
    selector_cache: bool = False

    @cached_property
    def _consumer_pattern(self) -> re.Pattern:
        # `*` in the prefix/postfix is exactly one word (the consumer group).
        def part(text: str) -> str:
            return r"\.".join("[^.]+" if w == "*" else re.escape(w) for w in text.split("."))
        return re.compile(f"^{part(self.prefix)}(?P<topic>.+?){part(self.postfix) if self.postfix else ''}$")

    def topic_of(self, queue_name: str) -> str | None:
        """The topic a consumer queue name reads from, or None when it is not one of ours."""
        m = self._consumer_pattern.match(queue_name)
        if m is None:
            return None
        topic = m.group("topic")
        return topic if matches(self.name, topic) else None


DEFAULT = VirtualTopic()


def find(virtual_topics: list[VirtualTopic], queue_name: str) -> tuple[VirtualTopic, str] | None:
    for vt in virtual_topics:
        topic = vt.topic_of(queue_name)
        if topic is not None:
            return vt, topic
    return None


def is_virtual(virtual_topics: list[VirtualTopic], address: str) -> bool:
    return any(matches(vt.name, address) for vt in virtual_topics)
