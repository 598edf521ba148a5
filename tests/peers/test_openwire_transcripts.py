"""The same JMS scenarios (java/JmsScenarios.java on the stock ActiveMQ 5.17 client: client
acknowledge and recover, selectors, temporary-queue request/reply, a durable subscription across
reconnects, local transactions, every body type, a clean close with unacknowledged messages)
against ActiveMQ Classic 5.17.2 and against Hermod: the normalized transcripts must be equal,
line for line. Classic's are committed in tests/openwire/classic_transcripts/; the first test
checks they are still what Classic gives (HERMOD_WRITE_TRANSCRIPTS=1 rewrites them)."""
from __future__ import annotations

import difflib
import os

import jms_scenarios
import pytest

from hermod.broker.adapters.registry import SERVED


@pytest.fixture(scope="module")
def scenarios() -> list[str]:
    why = jms_scenarios.missing()
    if why:
        pytest.skip(why)
    return jms_scenarios.names()


# Where Hermod differs from Classic on purpose, scenario -> why. There the same lines must
# arrive, in Hermod's order.
DELIBERATE = {
    # Classic dispatches a queue in arrival order unless its policy sets prioritizedMessages;
    # Hermod orders a queue by priority always, as Artemis does (and as the AMQP header asks).
    "priority": "higher priority first",
}


def _priority(line: str) -> int:
    for word in line.split():
        if word.startswith("priority="):
            return int(word.split("=", 1)[1])
    return -1


def _unordered(lines: list[str]) -> list[str]:
    """The lines without their receive-order ids (`id=#N`), sorted."""
    return sorted(" ".join(w for w in line.split() if not w.startswith("id=#")) for line in lines)


def differences(got: dict[str, list[str]], scenarios: list[str], deliberate: bool = False) -> str:
    out = []
    for name in scenarios:
        want = jms_scenarios.expected(name)
        mine = got.get(name, ["(no transcript)"])
        if deliberate and name in DELIBERATE and _unordered(mine) == _unordered(want):
            received = [_priority(line) for line in mine if line.startswith("recv ")]
            if received == sorted(received, reverse=True):
                continue
        if mine != want:
            out += [f"--- {name}", *difflib.unified_diff(want, mine, "classic", "this broker", lineterm="", n=1)]
    return "\n".join(out)


def test_classic_gives_the_committed_transcripts(start_classic, scenarios):
    classic = start_classic(persistent=True, protocols=("openwire",))
    got = jms_scenarios.run(classic.openwire_url, scenarios)
    assert list(got) == scenarios
    if os.environ.get("HERMOD_WRITE_TRANSCRIPTS"):
        jms_scenarios.write(got)
    assert not any(line.startswith("exception ") for lines in got.values() for line in lines), got
    assert differences(got, scenarios) == ""


def test_hermod_gives_classics_transcripts(start_broker, scenarios):
    if "openwire" not in SERVED:
        pytest.skip("this build of Hermod does not serve OpenWire yet (broker/adapters/registry.py SERVED)")
    broker = start_broker()
    got = jms_scenarios.run(f"tcp://{broker.address}", scenarios)
    found = differences(got, scenarios, deliberate=True)
    assert found == "", "\n" + found
