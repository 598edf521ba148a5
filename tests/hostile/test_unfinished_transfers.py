"""Issue 28, finding 12: unfinished multi-frame transfers bypassed the memory limit (with
`max_memory_mb = 64`, eight unfinished 60 MiB transfers took the broker from 63 to 560 MiB).
Contract ("Delivery guarantees and limits"): every byte the broker holds for clients counts
against `max_memory_mb`, transfers not yet complete included; a transfer that would go over is
refused on its link with `amqp:resource-limit-exceeded` before it is buffered. The bytes held
show in `/metrics` `hermod_memory_used_bytes` and go when the transfer completes (then its
message counts as usual), aborts, or its link or connection ends."""
from __future__ import annotations

import re
import time
import urllib.request

from hostile_support import ROUND_TRIP_BOUND, rss_kib
from proton import uint
from raw_amqp import Closed, RawClient, message_bytes, performative, transfer

from hermod_testing import wait_for

MIB = 1024 * 1024
LIMIT_MB = 16
FRAME = 512 * 1024  # payload per transfer frame (the broker's max_frame_size is 1 MiB)
PER_LINK = 6 * MIB  # what each link sends of its transfer before stopping
ADDRESS = "hostile.unfinished"


def used_bytes(broker) -> int:
    url = next(m.group(1) for line in broker.stdout_lines if (m := re.search(r"hermod http on (\S+)", line)))
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return int(float(re.search(r"^hermod_memory_used_bytes (\S+)$", text, re.M).group(1)))


def more(handle: int, payload: bytes, last: bool = False, aborted: bool = False) -> bytes:
    """A continuation frame of the transfer in progress on `handle`."""
    fields = [uint(handle), None, None, None, False, not last and not aborted, None, None, False, aborted]
    return performative("transfer", fields, payload=payload)


def start_senders(client: RawClient, links: int) -> None:
    client.handshake("unfinished")
    client.begin()
    for h in range(links):
        client.attach_sender(h, ADDRESS, name=f"big-{h}")
    names = {f"big-{h}" for h in range(links)}
    read_for(client, lambda: names <= {f.link for f in client.frames if f.name == "flow"}, ROUND_TRIP_BOUND,
             "credit on every link")


def send_unfinished(client: RawClient, handle: int, body: bytes, upto: int, delivery_id: int | None = None) -> None:
    """The first `upto` bytes of the message `body`, in frames of FRAME, the transfer left open."""
    client.send(transfer(handle, handle if delivery_id is None else delivery_id, body[:FRAME], more=True))
    for at in range(FRAME, upto, FRAME):
        try:
            client.send(more(handle, body[at:min(at + FRAME, upto)]))
        except OSError:
            return  # the broker may have closed the connection: the test says what it expected


def detached(client: RawClient) -> dict[str, str | None]:
    return {f.link: f.error for f in client.frames if f.name == "detach"}


def read_for(client: RawClient, until, bound: float, what: str) -> None:
    deadline = time.monotonic() + bound
    while not until():
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out waiting for {what}; frames: {[(f.name, f.link, f.error) for f in client.frames]}"
        try:
            client.read_frame(remaining)
        except TimeoutError:
            continue
        except Closed:
            raise AssertionError(f"the broker closed the connection while waiting for {what}: "
                                 f"{[(f.name, f.link, f.error, f.description) for f in client.frames[-3:]]}") from None


def test_unfinished_transfers_count_against_max_memory_mb(guarded):
    broker, guard = guarded(f"[server]\nmax_memory_mb = {LIMIT_MB}\n")
    baseline = used_bytes(broker)
    bodies = [("b%d" % h) * (PER_LINK // 2 + MIB) for h in range(4)]  # each message over PER_LINK
    encoded = [message_bytes(b) for b in bodies]
    with RawClient(broker.address, timeout=30) as attacker:
        start_senders(attacker, 4)
        # 6 MiB on each of four links: the first two fit in 16 MiB, the third and fourth would not.
        for h in range(4):
            send_unfinished(attacker, h, encoded[h], PER_LINK)
        read_for(attacker, lambda: {"big-2", "big-3"} <= set(detached(attacker)), ROUND_TRIP_BOUND,
                 "the links whose transfers would go over the limit to be detached")
        gone = detached(attacker)
        assert gone == {"big-2": "amqp:resource-limit-exceeded", "big-3": "amqp:resource-limit-exceeded"}, gone
        # The two that fit are held, and counted; nothing past the limit is.
        held = used_bytes(broker) - baseline
        assert 2 * PER_LINK <= held <= LIMIT_MB * MIB, f"{held} bytes held for 12 MiB of unfinished transfers"
        guard.round_trip("while unfinished transfers hold the memory")
        # The first one completes: accepted, then counted as a message on its queue.
        rest = encoded[0][PER_LINK:]
        for at in range(0, len(rest), FRAME):
            attacker.send(more(0, rest[at:at + FRAME], last=at + FRAME >= len(rest)))
        def outcome_of_0():
            return next((f for f in attacker.frames if f.name == "disposition" and int(f.field(1)) == 0), None)
        read_for(attacker, outcome_of_0, ROUND_TRIP_BOUND, "the outcome of the completed transfer")
        outcome = outcome_of_0()
        assert outcome.field(4) is not None and int(outcome.field(4).descriptor) == 0x24, outcome  # accepted
    # The connection is gone with link 1's transfer unfinished: only the stored message stays.
    stored = len(encoded[0])
    wait_for(lambda: used_bytes(broker) - baseline < stored + MIB,
             message="the unfinished transfers' memory given back when their connection closed")
    assert used_bytes(broker) - baseline >= stored
    guard.round_trip("after the unfinished transfers")
    guard.expect(ADDRESS, [bodies[0]], send=False)
    guard.verify()
    wait_for(lambda: used_bytes(broker) < baseline + MIB, message="memory back to its baseline")


def test_aborted_and_detached_unfinished_transfers_give_their_memory_back(guarded):
    broker, guard = guarded(f"[server]\nmax_memory_mb = {LIMIT_MB}\n")
    baseline = used_bytes(broker)
    encoded = message_bytes("a" * (12 * MIB))
    with RawClient(broker.address, timeout=30) as attacker:
        start_senders(attacker, 2)
        for round_ in range(3):  # 10 MiB each time: without the release, the second would not fit
            send_unfinished(attacker, 0, encoded, 10 * MIB, delivery_id=round_)
            attacker.send(more(0, b"", aborted=True))
            wait_for(lambda: used_bytes(broker) - baseline < MIB, message=f"abort {round_} gives the memory back")
        assert "big-0" not in detached(attacker)
        send_unfinished(attacker, 1, encoded, 10 * MIB, delivery_id=3)
        wait_for(lambda: used_bytes(broker) - baseline >= 10 * MIB, message="the unfinished transfer counted")
        attacker.send(performative("detach", [uint(1), True]))
        attacker.expect("detach", lambda f: f.link == "big-1")
        wait_for(lambda: used_bytes(broker) - baseline < MIB, message="the detach gives the memory back")
        guard.round_trip("after aborts and a detach")
        attacker.send(performative("close", []))
        attacker.expect("close")
    guard.verify()


def test_a_single_transfer_larger_than_the_limit_is_refused_before_it_is_buffered(guarded):
    broker, guard = guarded(f"[server]\nmax_memory_mb = {LIMIT_MB}\n")
    before = rss_kib(broker.proc.pid)
    encoded = message_bytes("z" * (40 * MIB))
    with RawClient(broker.address, timeout=30) as attacker:
        start_senders(attacker, 1)
        send_unfinished(attacker, 0, encoded, 40 * MIB)
        read_for(attacker, lambda: "big-0" in detached(attacker), ROUND_TRIP_BOUND, "the link detached")
        assert detached(attacker) == {"big-0": "amqp:resource-limit-exceeded"}
        description = next(f.description for f in attacker.frames if f.name == "detach")
        assert "max_memory_mb" in description, description
    grown_mib = (rss_kib(broker.proc.pid) - before) / 1024
    assert grown_mib < LIMIT_MB + 16, f"the broker grew {grown_mib:.0f} MiB for a refused 40 MiB transfer"
    guard.round_trip("after the refused transfer")
    guard.verify()
