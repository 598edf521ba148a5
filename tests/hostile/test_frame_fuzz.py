"""Frame-level fuzzing at a live broker socket: hypothesis builds well-framed AMQP frames whose
performative (open, begin, attach, flow, transfer, disposition, detach, end, close) is mutated:
fields of the wrong type, mandatory fields missing, huge values, a body that is not a list, the
wrong descriptor. Each example is a fresh connection brought to the point where the performative
makes sense (SASL, open, a session, a sending link with credit), then the mutated frame, then a
probe (a valid begin on another channel).

The broker must never crash, must answer every example (the probe's begin: it carried on; or a
close/end/detach naming an AMQP condition other than amqp:internal-error), and a bystander client
keeps being served throughout. 300 examples, about half a minute.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hermod_testing import BrokerProcess
from hostile_support import Guard
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from proton import Described, symbol, ubyte, uint, ulong, ushort
from raw_amqp import (
    AMQP_HEADER,
    CODES,
    NAMES,
    PROBE,
    SASL_HEADER,
    RawClient,
    described,
    encode,
    frame,
    message_bytes,
    open_fields,
    performative,
    source,
    target,
)

EXAMPLES = 300
ROUND_TRIP_EVERY = 20
ANSWER_BOUND = 5.0  # seconds for the broker to answer the frame or the probe after it


def template(name: str) -> list:
    """Valid fields for `name`, in a connection set up by `prelude` (link handle 0, delivery 0)."""
    return {
        "open": lambda: open_fields("fuzz", max_frame=65536, channel_max=100, idle_ms=30000),
        "begin": lambda: [None, uint(0), uint(1000), uint(1000), uint(64)],
        "attach": lambda: ["fz-new", uint(1), False, ubyte(0), ubyte(0), source("fz-new"),
                           target("fuzz.q"), None, None, uint(0), ulong(0)],
        "flow": lambda: [uint(1), uint(1000), uint(1), uint(1000), uint(0), uint(0), uint(10),
                         uint(0), False, False],
        "transfer": lambda: [uint(0), uint(0), b"t0", uint(0), False, False],
        "disposition": lambda: [False, uint(0), uint(0), True, described(0x24, [])],
        "detach": lambda: [uint(0), True, None],
        "end": lambda: [None],
        "close": lambda: [None],
    }[name]()


ascii_text = st.text(st.characters(max_codepoint=127), max_size=20)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 63 - 1),
    st.integers(0, 2 ** 32 - 1).map(uint), st.integers(0, 2 ** 64 - 1).map(ulong),
    st.integers(0, 255).map(ubyte), st.integers(0, 65535).map(ushort),
    st.text(max_size=40), st.binary(max_size=40), ascii_text.map(symbol),
    st.floats(allow_nan=True, allow_infinity=True),
)
wrong_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=5),
    st.dictionaries(ascii_text.map(symbol), scalars, max_size=4),
    st.sampled_from([0x1D, 0x24, 0x28, 0x29, 0x77, 0x12]).map(lambda c: described(c, ["x", uint(1)])),
)
huge_values = st.sampled_from([
    uint(0xFFFFFFFF), ulong(2 ** 64 - 1), ushort(65535), -(2 ** 63), math.inf,
    "x" * 60_000, b"\xff" * 60_000, symbol("s" * 60_000), list(range(8_000)),
    {symbol(f"k{i}"): i for i in range(3_000)},
])
mutation = st.one_of(
    st.tuples(st.just("wrong"), st.integers(0, 12), wrong_values),
    st.tuples(st.just("huge"), st.integers(0, 12), huge_values),
    st.tuples(st.just("drop"), st.integers(0, 12), st.none()),
)
descriptors = st.one_of(
    st.none(),  # keep the performative's own
    st.sampled_from(sorted(CODES.values()) + [0x1D, 0x28, 0x29, 0x70, 0x77, 0xFF]),
    st.integers(0, 2 ** 64 - 1),
    st.just("symbol"),
)


@st.composite
def mutated_frames(draw):
    name = draw(st.sampled_from(["open", "begin", "attach", "flow", "transfer", "disposition",
                                 "detach", "end", "close"]))
    fields = template(name)
    for kind, index, value in draw(st.lists(mutation, min_size=1, max_size=4)):
        if kind == "drop":
            fields = fields[:index]
        else:
            fields += [None] * (index + 1 - len(fields))
            fields[index] = value
    body: object = fields
    if draw(st.integers(0, 19)) == 0:
        body = draw(wrong_values)  # a performative whose body is not a list
    descriptor = draw(descriptors)
    if descriptor is None:
        code: object = ulong(CODES[name])
    elif descriptor == "symbol":
        code = symbol(f"amqp:{name}:list")
    else:
        code = ulong(descriptor)
    payload = message_bytes("fuzzed", durable=True) if name == "transfer" else b""
    acts_as = NAMES.get(int(code)) if isinstance(code, ulong) else None
    return name, acts_as, encode(Described(code, body)) + payload


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory):
    broker = BrokerProcess(["--port", "0", "--store", "memory"], tmp_path_factory.mktemp("fuzz")).start()
    yield broker, Guard(broker)  # only fresh connections: examples may take long on a failure
    broker.stop()


def prelude(client: RawClient, name: str) -> int:
    """Bring a connection to where `name` makes sense; returns the channel to send it on."""
    if name == "open":
        client.send(SASL_HEADER)
        client._read_exact(8)
        client.expect("sasl-mechanisms")
        client.send(frame(encode(described(CODES["sasl-init"], [symbol("ANONYMOUS"), b""])), 0, 1))
        client.expect("sasl-outcome")
        client.send(AMQP_HEADER)
        client._read_exact(8)
        return 0
    client.handshake("fuzz")
    if name == "begin":
        return 1
    client.begin()
    if name in ("end", "attach"):
        return 0
    client.attach_sender(0, "fuzz.q", name="fz")
    client.expect("flow", lambda f: f.link == "fz")
    if name in ("disposition", "detach", "flow"):
        client.send(performative("transfer", [uint(0), uint(0), b"t0", uint(0), False, False],
                                 payload=message_bytes("first", durable=True)))
        client.expect("disposition")
    return 0


outcomes: Counter = Counter()
examples = itertools.count()


# No shrinking: each failing example costs a 5 s wait, and the message shows the frame's bytes.
@settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=mutated_frames())
def test_mutated_performatives_are_answered_and_the_broker_keeps_serving(fuzz_target, case):
    broker, guard = fuzz_target
    name, acts_as, body = case
    with RawClient(broker.address, timeout=10) as client:
        channel = prelude(client, name)
        try:
            client.send(frame(body, channel) + PROBE)
        except OSError:
            pass  # the broker may hang up while the frame is still being written; read below
        seen = client.answer(ANSWER_BOUND)
    outcomes[f"{name}: {seen}"] += 1
    assert broker.proc.poll() is None, f"the broker died on a mutated {name}:\n" + "".join(
        broker.stderr_lines[-20:])
    what = f"mutated {name} (acting as {acts_as}): {body[:200]!r}"
    if seen != "carried on":
        condition = seen.split(" ", 1)[1]
        if condition == "None":  # a close with no error answers only a close
            assert seen == "close None" and acts_as == "close", f"{what}: {seen}"
        else:
            assert condition.startswith("amqp:") and condition != "amqp:internal-error", \
                f"{what}: {seen}"
    if next(examples) % ROUND_TRIP_EVERY == 0:
        guard.fresh_round_trip(f"after a mutated {name}")


def test_the_bystander_is_served_after_the_fuzzing(fuzz_target):
    broker, guard = fuzz_target
    assert broker.proc.poll() is None
    guard.fresh_round_trip("after the fuzzing")
    guard.verified = True
