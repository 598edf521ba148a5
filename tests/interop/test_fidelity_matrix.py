"""Issue 17 item 2: the type fidelity matrix. Every sender x every receiver x every case of
fidelity_cases.py; the bare message (properties, application-properties, body sections) must
arrive byte for byte, and the header's durable / priority / ttl as sent.

One broker for the module, one sender run and one receiver run (one connection each) per client
pair, all cases in that run; each case is then its own test item, so the report counts the
matrix. A case a client cannot express is an xfail naming the client's limitation
(KNOWN_LIMITATIONS); anything else that differs is a broker bug.
"""
from __future__ import annotations

import fnmatch

import pytest

from fidelity_cases import CASES, SCALARS
from fidelity_matrix import CLIENTS, PairRun, available, bare_sections, header_fields, run_pair
from hermod_testing import BrokerProcess

import canon

# (client name, role "send"/"receive", case id glob) -> reason. Each is the client's own: the same
# case fails from the client to itself, and the broker's bytes are checked by the raw receivers.
_CPP_ONE_BODY = ("proton::message holds one body value: of several data / amqp-sequence sections "
                 "only the last is kept")
_CPP_NULL_BODY = "proton::message does not encode a null amqp-value body (it writes no body section)"
_RHEA_NESTED_ARRAY = ("rhea's writer passes no element constructor to an array inside an array "
                      "(types.Writer.write_array), so it cannot encode an array of arrays at all")
_RHEA_DESCRIBED_BODY = ("rhea puts the amqp-value section's descriptor on the body's own Typed object "
                        "(types.described_nc), replacing a described body's descriptor: it sends the bare value")
# amqp10 3.6.0 as a sender (interop/amqp10/typed.js says where each comes from in its codec)
_AMQP10_SEND = {
    "*decimal*": "amqp10 registers decimal32/64/128 without an encoder (NotImplementedError)",
    "*char*": "amqp10's char encoder writes the 0x73 constructor twice (and reads one UTF-16 unit)",
    **{f"map-keys.{kind}": "amqp10 encodes a map from a JavaScript object: its keys are always strings"
       for kind in SCALARS if kind not in ("string", "null")},
    "value.nested": "amqp10 encodes a map from a JavaScript object: its keys are always strings",
    "array-empty.*": "amqp10 encodes an empty array as null",
    "array.described": "amqp10's AMQPArray has no descriptor",
    "described.*": "amqp10 takes a ulong descriptor as a JavaScript number (not exact above 2^53)",
    "*.three": "an amqp10 message has one body section (message.body)",
    **{case: "amqp10 cannot encode a ulong of 2^63 or more (it reads its Int64 as signed to pick the encoding)"
       for case in ("value.ulong.3", "list.ulong", "map.ulong", "app-props.ulong", "properties.all.ulong")},
}
# Azure's _pyamqp as a sender (interop/azure/pyamqpclient.py)
_AZURE_BODY = ("_pyamqp writes the amqp-value body from a plain Python value, guessing its type (str, bool, "
               "int, float, UUID, bytes, list, dict, tuple) and leaving the section out when the value is "
               "falsy; typed values only inside a list, a map's values or a described value")
_AZURE_SEND = {
    **{case: _AZURE_BODY for case in ("value.*", "array.*", "array-empty.*", "map-keys.*", "properties.sparse")},
    "*decimal*": "_pyamqp has no decimal32/64, and a decimal128 only from a Python Decimal",
    "*char*": "_pyamqp has no char type",
}
KNOWN_LIMITATIONS: dict[tuple[str, str, str], str] = {
    **{("azure", "send", case): reason for case, reason in _AZURE_SEND.items()},
    **{("amqp10", "send", case): reason for case, reason in _AMQP10_SEND.items()},
    ("rhea", "send", "value.nested"): _RHEA_NESTED_ARRAY,
    ("rhea", "send", "value.described-list"): _RHEA_DESCRIBED_BODY,
    **{("protoncpp", role, case): _CPP_ONE_BODY for role in ("send", "receive")
       for case in ("data.three", "sequence.three")},
    **{("protoncpp", role, case): _CPP_NULL_BODY for role in ("send", "receive")
       for case in ("value.null.0", "properties.sparse")},
}

CASE_IDS = [cid for cid, _ in CASES]
CASE_BY_ID = dict(CASES)


@pytest.fixture(scope="module")
def fidelity_broker(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("fidelity-broker")
    b = BrokerProcess(["--port", "0", "--store", "memory"], cwd).start()
    yield b
    b.stop()


_runs: dict[tuple[str, str], PairRun] = {}


@pytest.fixture(scope="module")
def pair_runs(fidelity_broker, tmp_path_factory):
    work = tmp_path_factory.mktemp("fidelity-pairs")

    def get(sender, receiver) -> PairRun:
        key = (sender.name, receiver.name)
        if key not in _runs:
            _runs[key] = run_pair(fidelity_broker.url, work, sender, receiver, CASES)
        return _runs[key]

    yield get
    _runs.clear()


def _limitation(client: str, role: str, case_id: str) -> str | None:
    for (name, r, pattern), reason in KNOWN_LIMITATIONS.items():
        if name == client and r == role and fnmatch.fnmatchcase(case_id, pattern):
            return reason
    return None


PAIRS = [(s, r) for s in CLIENTS if s.sends for r in CLIENTS]


@pytest.mark.parametrize("sender,receiver", PAIRS, ids=[f"{s.name}-to-{r.name}" for s, r in PAIRS])
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_bare_message_arrives_byte_for_byte(pair_runs, sender, receiver, case_id):
    available(sender)
    available(receiver)
    run = pair_runs(sender, receiver)
    n = CASE_IDS.index(case_id)
    got, sent_count = len(run.received), len(run.sent)  # (asserting on run itself would repr megabytes)
    assert got == sent_count, f"the receiver got {got} of {sent_count}\n{run.transcript}"
    spec = CASE_BY_ID[case_id]
    if n not in run.sent:  # the client could not encode it at all
        reason = _limitation(sender.name, "send", case_id)
        if reason:
            pytest.xfail(f"{sender.name} cannot send it: {reason}")
        raise AssertionError(f"{sender.name} did not send case {n} (sent {len(run.sent)} of {len(CASES)})\n"
                             f"{run.transcript}")
    assert n in run.received, f"case {n} did not arrive\n{run.transcript}"
    sent, received = run.sent[n], run.received[n]

    # 1. the sender put the case on the wire as specified (else: the sending client's limitation)
    sent_sections = canon.decode_message(sent)
    if bare_sections(sent_sections) != bare_sections(spec):
        reason = _limitation(sender.name, "send", case_id)
        if reason:
            pytest.xfail(f"{sender.name} cannot send it: {reason}")
        raise AssertionError(f"{sender.name} sent something else than the case (client limitation "
                             f"not yet documented)\nspec {bare_sections(spec)}\nsent {bare_sections(sent_sections)}")

    # 2. the broker delivered the bare message unchanged
    if receiver.raw_receive:
        assert canon.bare_bytes(received) == canon.bare_bytes(sent), \
            f"bare message changed in the broker\nsent     {canon.bare_bytes(sent)[:400].hex()}\n" \
            f"received {canon.bare_bytes(received)[:400].hex()}"
    else:
        got = bare_sections(canon.decode_message(received))
        if got != bare_sections(sent_sections):
            reason = _limitation(receiver.name, "receive", case_id)
            if reason:
                pytest.xfail(f"{receiver.name} cannot receive it faithfully: {reason}")
            raise AssertionError(f"{receiver.name} saw another bare message\nsent {bare_sections(sent_sections)}\n"
                                 f"got  {got}")
    expected_header = header_fields(sent_sections)
    if expected_header is not None:
        assert _normal_header(header_fields(canon.decode_message(received))) == _normal_header(expected_header)


def _normal_header(fields):
    """durable, priority, ttl with the spec's defaults filled in (null durable is false, ...)."""
    if fields is None:
        fields = [{"null": None}] * 4
    durable, priority, ttl = fields[:3]
    return [durable if "boolean" in durable else {"boolean": False},
            priority if "ubyte" in priority else {"ubyte": 4},
            ttl if "uint" in ttl else None]
