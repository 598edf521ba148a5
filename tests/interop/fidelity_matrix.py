"""Runs the fidelity matrix's client pairs: one sender run and one receiver run per pair, every
case in one connection each, with the messages exchanged as files of length-prefixed bytes.

Each client program (interop/fidelity/, interop/protonc/, ...) speaks one CLI:

    <prog> send    --url U --address A (--spec SPEC.jsonl | --input IN.bin) --sent SENT.bin
    <prog> receive --url U --address A --count N --output OUT.bin

Senders that build messages with their own API from typed JSON take --spec; senders whose
native API is a codec (Proton C / C++) take --input, the reference encoding, decode it with their
codec and send what it re-encodes. SENT is what the sender put on the wire, OUT what the receiver
got (raw bytes where the client exposes them, else its codec's re-encoding of what it decoded).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


from interop_clients import INTEROP, setup_component

sys.path.insert(0, str(INTEROP / "fidelity"))
import canon  # noqa: E402

PAIR_TIMEOUT = 120  # seconds: one client run (all cases, up to 10 MB each) stays well within this


@dataclass(frozen=True)
class FidelityClient:
    name: str
    component: str  # interop/setup.sh component
    argv: tuple[str, ...]  # the program; "send"/"receive" and options follow
    input_kind: str  # "spec" (typed JSON) or "input" (reference bytes)
    raw_receive: bool  # the receiver reports the bytes as they arrived
    cwd: Path = INTEROP
    sends: bool = True  # False: in the matrix as a receiver only (see the client's entry)


def _venv_python() -> str:
    return sys.executable


CLIENTS = [
    FidelityClient("py040", "python", (_venv_python(), str(INTEROP / "fidelity" / "pyclient.py")),
                   "spec", True),
    FidelityClient("py037", "pyproton37", ("/usr/bin/python3", str(INTEROP / "fidelity" / "pyclient.py")),
                   "spec", True),
    FidelityClient("protonc", "protonc", (str(INTEROP / "protonc" / "build" / "protonc-fidelity"),), "input", True),
    FidelityClient("protoncpp", "protoncpp", (str(INTEROP / "protoncpp" / "build" / "protoncpp-fidelity"),),
                   "input", False),
    # rhea builds each message with its typed-value API (interop/rhea/typed.js)
    FidelityClient("rhea", "rhea", ("node", str(INTEROP / "rhea" / "fidelity.js")), "spec", True, INTEROP / "rhea"),
    # the amqp10 npm client (node-amqp10 3.6.0): its typed API (interop/amqp10/typed.js), raw bytes received
    FidelityClient("amqp10", "amqp10", ("node", str(INTEROP / "amqp10" / "fidelity.js")), "spec", True,
                   INTEROP / "amqp10"),
    # Azure's pure-Python AMQP stack (azure.servicebus._pyamqp), installed under interop/azure/build
    FidelityClient("azure", "azure", (_venv_python(), str(INTEROP / "azure" / "pyamqpclient.py")), "spec", True),
]


def available(client: FidelityClient) -> None:
    """Skip (toolchain not installable here) or fail (setup broke) unless the client is ready."""
    if client.component != "python":
        setup_component(client.component)


@dataclass
class PairRun:
    sender: FidelityClient
    receiver: FidelityClient
    sent: list[bytes]
    received: list[bytes]
    transcript: str


def _run(argv: list[str], cwd: Path, env_note: str) -> tuple[int, list[dict], str]:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=PAIR_TIMEOUT,
                          env=_client_env())
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"event": "unparsed", "line": line})
    return proc.returncode, events, f"--- {env_note} exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


def _client_env() -> dict:
    import os
    env = dict(os.environ)
    # Debian's Python must not see the venv's Proton 0.40 (or the worktree's PYTHONPATH packages)
    env.pop("PYTHONPATH", None)
    env.setdefault("NODE_NO_WARNINGS", "1")
    return env


def run_pair(url: str, workdir: Path, sender: FidelityClient, receiver: FidelityClient,
             cases: list[tuple[str, list]]) -> PairRun:
    """Send every case with `sender`, then receive them all with `receiver`, on a queue of its own."""
    pair_dir = workdir / f"{sender.name}--{receiver.name}"
    if pair_dir.exists():
        shutil.rmtree(pair_dir)
    pair_dir.mkdir(parents=True)
    address = f"fidelity.{sender.name}.{receiver.name}"
    sent_path, out_path = pair_dir / "sent.bin", pair_dir / "received.bin"
    numbered = [with_case_number(s, i) for i, (_, s) in enumerate(cases)]
    if sender.input_kind == "spec":
        src = pair_dir / "spec.jsonl"
        src.write_text("".join(json.dumps({"n": i, "sections": s}) + "\n" for i, s in enumerate(numbered)))
        src_opt = ["--spec", str(src)]
    else:
        src = pair_dir / "input.bin"
        canon.write_frames(src, [canon.encode_message(s) for s in numbered])
        src_opt = ["--input", str(src)]
    rc, events, t1 = _run([*sender.argv, "send", "--url", url, "--address", address, *src_opt,
                           "--sent", str(sent_path)], sender.cwd, f"{sender.name} send")
    sent = canon.read_frames(sent_path) if sent_path.exists() else []
    rc2, events2, t2 = _run([*receiver.argv, "receive", "--url", url, "--address", address, "--count",
                             str(len(sent)), "--output", str(out_path)], receiver.cwd, f"{receiver.name} receive")
    received = canon.read_frames(out_path) if out_path.exists() else []
    return PairRun(sender, receiver, _by_case(sent), _by_case(received), t1 + "\n" + t2)


CASE_ANNOTATION = "x-opt-fidelity-case"


def with_case_number(sections: list, n: int) -> list:
    """The case with a message annotation carrying its number: a broker may reorder (priority),
    and annotations are outside the bare message."""
    note = [0x72, {"map": [[{"symbol": CASE_ANNOTATION}, {"uint": n}]]}]
    at = 1 if sections and sections[0][0] == 0x70 else 0
    return sections[:at] + [note] + sections[at:]


def _by_case(messages: list[bytes]) -> dict[int, bytes]:
    """Case number -> message bytes, from each message's case annotation."""
    out = {}
    for m in messages:
        for code, start, end in canon.section_spans(m):
            if code == 0x72:
                (_, value), = canon.decode_message(m[start:end])
                number = dict((k.get("symbol"), v) for k, v in value["map"]).get(CASE_ANNOTATION)
                if number is not None:  # a uint as sent; read any integer type in case a client re-types it
                    out[int(next(iter(number.values())))] = m
    return out


def bare_sections(sections: list) -> list:
    """The bare message's sections with the properties composite normalised: trailing null fields
    dropped and an all-null properties section left out, which AMQP defines as the same thing
    (Proton C++ always writes an empty properties section)."""
    out = []
    for code, value in sections:
        if code not in canon.BARE_SECTIONS:
            continue
        if code == 0x73 and "list" in value:
            fields = list(value["list"])
            while fields and fields[-1] == {"null": None}:
                fields.pop()
            if not fields:
                continue
            value = {"list": fields}
        out.append([code, value])
    return out


def header_fields(sections: list) -> list | None:
    """durable, priority, ttl and first-acquirer of the header (delivery-count is the broker's)."""
    for code, value in sections:
        if code == 0x70:
            return (value["list"] + [{"null": None}] * 5)[:4]
    return None
