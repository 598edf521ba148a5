"""The same STOMP frames (stomp_scenarios.py: receipts and client-individual acks, a selector and
topic subscribers, transactions, NUL bodies and escaped headers, bad frames, a durable
subscription) against ActiveMQ Classic 5.17.2's STOMP transport and against Hermod: the
normalized transcripts must be equal, line for line, except where the contract departs from
Classic on purpose (stomp_scenarios.contract_view). Classic's are committed in
tests/stomp/classic_transcripts/; the first test checks they are still what Classic gives
(HERMOD_WRITE_TRANSCRIPTS=1 rewrites them)."""
from __future__ import annotations

import difflib
import os

import pytest
import stomp_scenarios

from hermod.broker.adapters.registry import SERVED


# Lines of Classic's transcripts that Hermod answers otherwise on purpose: (scenario, Classic's
# line) -> Hermod's line, and why.
DELIBERATE = {
    # `n > 0` on a STOMP header: STOMP headers are strings (the contract's table), and JMS/SQL-92
    # compares a string with a number as unknown; Classic's STOMP converts numeric-looking
    # strings. The contract says selectors use the same engine for every protocol.
    ("selector-and-topics", "red MESSAGE color=red destination=/queue/scn.sel expires=0 message-id=#1 n=2 "
                            "priority=4 subscription=red timestamp=set body=b'red'"): "red none",
}


def _hermod_view(name: str, line: str) -> str:
    return DELIBERATE.get((name, line), line)


def differences(got: dict[str, list[str]], view=lambda line: line, hermod: bool = False) -> str:
    out = []
    for name in stomp_scenarios.SCENARIOS:
        want = [view(line) for line in stomp_scenarios.expected(name)]
        if hermod:
            want = [_hermod_view(name, line) for line in want]
            # message-id numbers count the messages the transcript shows
            if any((name, line) in DELIBERATE for line in stomp_scenarios.expected(name)):
                want = [line.replace("message-id=#2", "message-id=#1") for line in want]
        mine = got.get(name, ["(no transcript)"])
        if mine != want:
            out += [f"--- {name}", *difflib.unified_diff(want, mine, "classic", "this broker", lineterm="", n=1)]
    return "\n".join(out)


def test_classic_gives_the_committed_stomp_transcripts(start_classic):
    classic = start_classic(persistent=True, protocols=("stomp",))
    got = stomp_scenarios.run(classic.stomp_port)
    if os.environ.get("HERMOD_WRITE_TRANSCRIPTS"):
        stomp_scenarios.write(got)
    assert not any(line.startswith("exception ") for lines in got.values() for line in lines), got
    assert differences(got) == ""


def test_hermod_gives_classics_stomp_transcripts(start_broker):
    if "stomp" not in SERVED:
        pytest.skip("this build of Hermod does not serve STOMP yet (broker/adapters/registry.py SERVED)")
    broker = start_broker()
    got = stomp_scenarios.run(int(broker.address.rsplit(":", 1)[1]))
    found = differences(got, stomp_scenarios.contract_view, hermod=True)
    assert found == "", "\n" + found
