"""Selector micro-benchmark: evaluations per second of a typical consumer selector.

    .venv/bin/python benchmarks/selector_bench.py [seconds-per-case]

Evaluates `region = 'EU' AND price > 100` against a message with 10 application properties,
once through `broker.core.selectable.message_lookup` on a stand-in message (the broker's path)
and once through a plain `dict.get` (the selector engine alone). One line per case.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermod.broker.core.selectable import message_lookup  # noqa: E402
from hermod.broker.selector import compile_selector  # noqa: E402

SELECTOR = "region = 'EU' AND price > 100"

PROPERTIES = {
    "region": "EU",
    "price": 150,
    "currency": "EUR",
    "customer": "c-1042",
    "priority_class": "gold",
    "quantity": 3,
    "discount": 0.15,
    "express": True,
    "warehouse": "DUB-2",
    "channel": "web",
}


@dataclass
class StandInMessage:
    """The attributes broker.core.selectable reads, as plain fields."""

    application_properties: dict = field(default_factory=lambda: dict(PROPERTIES))
    annotations: dict = field(default_factory=dict)
    durable: bool = True
    priority: int = 4
    message_id: object = "order-1"
    correlation_id: object = None
    user_id: bytes | None = None
    subject: str | None = None
    creation_time: int | None = 1_700_000_000_000
    group_id: str | None = None
    group_sequence: int | None = None
    expiration: int = 0
    address: str = "orders"
    size: int = 512
    delivery_count: int = 0
    container_id: str | None = "producer-1"


def rate(evaluate, lookup, seconds: float) -> float:
    """Evaluations per second, best of three runs of about `seconds` each."""
    best = 0.0
    batch = 10_000
    for _ in range(3):
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(batch):
                evaluate(lookup)
            count += batch
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, count / (now - start))
    return best


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    selector = compile_selector(SELECTOR)
    message = StandInMessage()
    assert selector.evaluate(message_lookup(message)) is True
    assert selector.evaluate(PROPERTIES.get) is True

    # The broker makes one lookup per message and may try several consumers' selectors on it;
    # count both the lookup creation and the evaluation, as a dispatch does.
    def via_message(msg):
        return selector.matches(message_lookup(msg))

    print(f"selector {SELECTOR!r}, 10 application properties:")
    print(f"  message_lookup(stand-in message): {rate(via_message, message, seconds):>12,.0f} evaluations/s")
    print(f"  dict.get:                         {rate(selector.matches, PROPERTIES.get, seconds):>12,.0f} evaluations/s")


if __name__ == "__main__":
    main()
