"""Hostile clients against a real broker (contract: "Delivery guarantees and limits on what clients
send", "Operations"). Each case attacks through raw frames (raw_amqp.RawClient) and then proves
from outside that (a) a polite bystander is still served within a bound, during and after the
attack, and (b) every message accepted before or around the attack comes back (guard.verify).
"""
from __future__ import annotations

import math
import socket
import struct
import threading
import time

import pytest
from hermod_testing import wait_for
from hostile_support import ROUND_TRIP_BOUND, rss_kib
from proton import Described, Message, symbol, ubyte, uint, ulong
from raw_amqp import (
    ARRAY_BOMB,
    BOMBS,
    OUTCOMES,
    PROBE,
    SASL_HEADER,
    Closed,
    RawClient,
    described,
    disposition,
    encode,
    flow_fields,
    frame,
    map8_with,
    message_bytes,
    nested_lists,
    performative,
    source,
    transfer,
)
from wire_helpers import connect

from hermod.broker.tools.clients import management_call

REFUSALS = {"amqp:invalid-field", "amqp:resource-limit-exceeded"}
DECODE_REFUSALS = {"amqp:decode-error", "amqp:invalid-field", "amqp:connection:framing-error"}
SELECTOR_FILTER = ulong(0x0000468C00000004)  # apache.org:selector-filter:string


def outcomes_of(frames, handle_deliveries=None) -> dict[int, str]:
    """delivery-id -> outcome name, from the broker's dispositions (role receiver)."""
    out: dict[int, str] = {}
    for f in frames:
        if f.name != "disposition" or f.field(0) is not True:
            continue
        first = int(f.field(1))
        last = int(f.field(2) if f.field(2) is not None else first)
        state = f.field(4)
        name = OUTCOMES.get(int(state.descriptor)) if isinstance(state, Described) else None
        for delivery_id in range(first, last + 1):
            if name:
                out[delivery_id] = name
    return out


def read_until(client: RawClient, done, timeout: float, what: str) -> None:
    """Read frames (kept in client.frames) until `done()` or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out waiting for {what}; last frames: "
                                 f"{[(f.name, f.error) for f in client.frames[-5:]]}")
        try:
            client.read_frame(remaining)
        except TimeoutError:
            continue
        except Closed:
            if not done():
                raise AssertionError(f"the broker closed the connection before {what}: "
                                     f"{[(f.name, f.error) for f in client.frames[-5:]]}")


def detach_of(client: RawClient, link: str):
    for f in client.frames:
        if f.name == "detach" and f.link == link:
            return f
    return None


def refused(client: RawClient, link: str, what: str, timeout: float = ROUND_TRIP_BOUND) -> str:
    """The attach of `link` is refused with one of REFUSALS; returns the description."""
    read_until(client, lambda: detach_of(client, link) is not None, timeout,
               f"the refusal of {what}")
    d = detach_of(client, link)
    assert d.error in REFUSALS, f"{what}: detached with {d.error} {d.description}"
    assert d.description, f"{what}: a refusal needs a clear description"
    return d.description


def raw_receive(url_address: str, address: str, count: int, src=None) -> list[bytes]:
    """Receive `count` transfers from `address` as raw payloads (no proton decoding), accept."""
    with RawClient(url_address) as client:
        client.handshake("raw-receiver")
        client.begin()
        client.attach_receiver(0, address, credit=count + 1, src=src)
        read_until(client, lambda: sum(f.name == "transfer" for f in client.frames) >= count,
                   ROUND_TRIP_BOUND, f"{count} messages on {address}")
        transfers = [f for f in client.frames if f.name == "transfer"]
        for f in transfers:
            client.send(disposition(int(f.field(1))))
        client.send(performative("detach", [uint(0), True]))
        client.expect("detach")
        return [f.payload for f in transfers]


# -- credit --------------------------------------------------------------------------------------


def test_transfers_beyond_credit_end_the_link_and_are_never_queued(guarded):
    # The address is blocked (over max_size_bytes with the block policy), so the broker grants
    # no more credit after the first window: every transfer past it is beyond credit.
    broker, guard = guarded("""
[[address_settings]]
match = "hostile.credit"
max_size_bytes = 1024
address_full_policy = "block"
""")
    with RawClient(broker.address) as attacker:
        attacker.handshake("credit-ignorer")
        attacker.begin()
        attacker.attach_sender(0, "hostile.credit")
        flow = attacker.expect("flow", lambda f: f.link == "snd-0")
        credit = int(flow.field(6))
        assert credit > 0
        total = max(2000, 2 * credit)
        burst = b"".join(transfer(0, i, message_bytes(f"c-{i}", durable=True)) for i in range(total))
        attacker.send(burst)
        guard.round_trip("while the transfers arrive")
        read_until(attacker, lambda: detach_of(attacker, "snd-0") is not None, 15,
                   f"the link's end after {total} transfers on {credit} credit")
        assert detach_of(attacker, "snd-0").error == "amqp:link:transfer-limit-exceeded"
        outcomes = outcomes_of(attacker.frames)
        accepted = sorted(i for i, o in outcomes.items() if o == "accepted")
        assert all(i < credit for i in accepted), f"accepted beyond credit: {accepted[credit:][:5]}"
        guard.round_trip("after the link ended")
    # Exactly the accepted ones are on the queue; nothing past the credit was queued.
    guard.expect("hostile.credit", [f"c-{i}" for i in accepted], send=False)
    guard.verify()


# -- a client that never reads --------------------------------------------------------------------


def test_a_consumer_that_never_reads_its_socket_costs_bounded_memory(guarded):
    broker, guard = guarded()
    count, size = 300, 64 * 1024
    bodies = [f"{i:06d}" + "x" * size for i in range(count)]
    guard.expect("hostile.flood", bodies)
    baseline = rss_kib(broker.proc.pid)
    attacker = RawClient(broker.address)
    attacker.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        attacker.handshake("never-reads")
        attacker.begin()
        attacker.attach_receiver(0, "hostile.flood", credit=1_000_000)
        # From here on the attacker reads nothing: the broker's writes back up.
        for _ in range(10):
            guard.round_trip("while a consumer does not read")
        guard.fresh_round_trip("while a consumer does not read")
        grown_mib = (rss_kib(broker.proc.pid) - baseline) / 1024
        backlog_mib = count * size / 2 ** 20
        assert grown_mib < backlog_mib / 2, (
            f"the broker grew {grown_mib:.1f} MiB for a consumer that does not read "
            f"({backlog_mib:.0f} MiB backlog): its output is not back-pressured")
    finally:
        attacker.close()
    # Nothing was settled by the attacker: every message is still there for the next consumer.
    guard.verify()


# -- links and sessions ------------------------------------------------------------------------------


def test_links_beyond_max_links_per_connection_are_refused_and_the_others_carry_on(guarded):
    broker, guard = guarded()  # max_links_per_connection = 1024 is the contract's default
    limit, total = 1024, 10_000
    with RawClient(broker.address, timeout=60) as attacker:
        attacker.handshake("link-hoarder")
        attacker.begin()
        attacker.send(b"".join(
            performative("attach", [f"l-{h}", uint(h), True, ubyte(0), ubyte(0),
                                    source("hostile.links"), described(0x29, [])])
            for h in range(total)))
        guard.round_trip("while 10,000 attaches arrive")

        read_until(attacker, lambda: sum(f.name == "attach" for f in attacker.frames) >= total, 60,
                   "an attach in answer to each of 10,000 attaches")
        read_until(attacker, lambda: sum(f.name == "detach" for f in attacker.frames) >= total - limit,
                   ROUND_TRIP_BOUND, f"the refusal of the {total - limit} links over the limit")
        detached = {int(f.link.removeprefix("l-")): f.error for f in attacker.frames if f.name == "detach"}
        over = [h for h in range(limit, total) if detached.get(h) != "amqp:resource-limit-exceeded"]
        assert not over, f"{len(over)} links over the limit were not refused, e.g. handle {over[0]}"
        under = sorted(h for h in detached if h < limit)
        assert not under, f"links within the limit were detached: {under[:5]}"
        assert not any(f.name in ("close", "end") for f in attacker.frames)
        # The links within the limit carry on: one takes a message.
        attacker.send(performative("flow", flow_fields(7, 1)))
        guard.expect("hostile.links", ["for-link-7"])
        read_until(attacker, lambda: any(f.name == "transfer" for f in attacker.frames), ROUND_TRIP_BOUND,
                   "a message on a link within the limit")
        delivery = next(f for f in attacker.frames if f.name == "transfer")
        assert delivery.link == "l-7"
        attacker.send(disposition(int(delivery.field(1))))
        guard.expected["hostile.links"].remove("for-link-7")
        guard.round_trip("after the attaches")
        attacker.send(performative("close", []))
        attacker.expect("close")
    guard.verify()


def test_session_churn_frees_ended_sessions(guarded):
    broker, guard = guarded()
    rounds, batch = 100, 100  # 10,000 begin/end pairs, 100 in flight at a time
    with RawClient(broker.address, timeout=30) as attacker:
        attacker.handshake("churner")
        baseline = rss_kib(broker.proc.pid)
        for r in range(rounds):
            attacker.send(b"".join(performative("begin", [None, uint(0), uint(100), uint(100)], ch)
                                   + performative("end", [], ch) for ch in range(batch)))
            ends = 0
            while ends < batch:
                f = attacker.read_frame()
                # A session-level flow (the broker's incoming window) may follow a begin.
                assert f.name in ("begin", "end", "flow"), f"round {r}: {f.name} {f.error} {f.description}"
                ends += f.name == "end"
                if f.name == "end":
                    assert f.error is None, f"round {r}: session ended with {f.error}"
            if r % 25 == 0:
                guard.round_trip(f"during session churn, round {r}")
        grown_mib = (rss_kib(broker.proc.pid) - baseline) / 1024
        assert grown_mib < 8, f"10,000 ended sessions kept {grown_mib:.1f} MiB"
        # Ended sessions do not count against max_sessions_per_connection (default 256): a
        # new session still works and carries a message.
        attacker.begin(channel=5)
        attacker.attach_sender(0, "hostile.churn", channel=5)
        attacker.expect("flow", lambda f: f.channel == attacker.peer_channel(5))
        attacker.send(transfer(0, 0, message_bytes("after-churn", durable=True), channel=5))
        read_until(attacker, lambda: outcomes_of(attacker.frames).get(0) == "accepted", ROUND_TRIP_BOUND,
                   "the message sent after the churn accepted")
    guard.expect("hostile.churn", ["after-churn"], send=False)
    guard.verify()


def test_sessions_beyond_max_sessions_per_connection_are_refused(guarded):
    broker, guard = guarded("[server]\nmax_sessions_per_connection = 8\n")
    with RawClient(broker.address) as attacker:
        attacker.handshake("session-hoarder")
        attacker.send(b"".join(performative("begin", [None, uint(0), uint(100), uint(100)], ch)
                               for ch in range(20)))
        read_until(attacker, lambda: sum(f.name == "end" for f in attacker.frames) >= 12, ROUND_TRIP_BOUND,
                   "the refusal of 12 sessions over the limit of 8")
        ends = {f.channel: f.error for f in attacker.frames if f.name == "end"}
        assert set(ends) == set(range(8, 20)), f"sessions ended: {sorted(ends)}"
        assert set(ends.values()) == {"amqp:resource-limit-exceeded"}, ends
        assert not any(f.name == "close" for f in attacker.frames)
        # A session within the limit carries on.
        attacker.attach_sender(0, "hostile.sessions", channel=3)
        attacker.expect("flow", lambda f: f.channel == 3)
        attacker.send(transfer(0, 0, message_bytes("in-session-3", durable=True), channel=3))
        read_until(attacker, lambda: outcomes_of(attacker.frames).get(0) == "accepted", ROUND_TRIP_BOUND,
                   "the message on a session within the limit accepted")
        guard.round_trip("with sessions refused")
    guard.expect("hostile.sessions", ["in-session-3"], send=False)
    guard.verify()


# -- slow-loris ---------------------------------------------------------------------------------------


def test_slow_loris_before_open_is_dropped_and_others_are_served(guarded):
    broker, guard = guarded("[server]\nidle_timeout_s = 1\n")
    host, port = broker.address.rsplit(":", 1)
    # The SASL header, then a SASL frame that claims 400 bytes, trickled one byte at a time.
    trickle = SASL_HEADER + struct.pack(">IBBH", 400, 2, 1, 0) + b"\x00" * 392
    sockets = [socket.create_connection((host, int(port)), timeout=5) for _ in range(30)]
    closed_after: dict[int, float] = {}
    start = time.monotonic()
    stop = threading.Event()

    def loris() -> None:
        position = 0
        while not stop.is_set() and len(closed_after) < len(sockets) and position < len(trickle):
            for i, s in enumerate(sockets):
                if i in closed_after:
                    continue
                try:
                    s.send(trickle[position:position + 1])
                    while s.recv(4096, socket.MSG_DONTWAIT):
                        pass
                    closed_after[i] = time.monotonic() - start  # recv returned b"": closed
                except BlockingIOError:
                    pass
                except OSError:
                    closed_after[i] = time.monotonic() - start
            position += 1
            stop.wait(0.2)  # the attack's pace: one byte per socket every 0.2 s

    attacker = threading.Thread(target=loris, daemon=True)
    attacker.start()
    try:
        deadline = time.monotonic() + 15
        while len(closed_after) < len(sockets) and time.monotonic() < deadline:
            guard.round_trip("during the slow-loris")
        assert len(closed_after) == len(sockets), (
            f"{len(sockets) - len(closed_after)} trickling connections still open after 15 s "
            f"(idle_timeout_s = 1)")
        assert max(closed_after.values()) < 10
    finally:
        stop.set()
        attacker.join(5)
        for s in sockets:
            s.close()
    guard.verify()


def test_slow_loris_after_open_is_served_intact_and_others_are_served(guarded):
    broker, guard = guarded()
    attackers = []
    frames = []
    for i in range(20):
        client = RawClient(broker.address)
        client.handshake(f"loris-{i}")
        client.begin()
        client.attach_sender(0, f"hostile.trickle.{i}")
        client.expect("flow", lambda f: f.link == "snd-0")
        attackers.append(client)
        frames.append(transfer(0, 0, message_bytes(f"trickled-{i}", durable=True)))
    stop = threading.Event()

    def loris() -> None:
        for position in range(max(len(f) for f in frames)):
            for client, data in zip(attackers, frames):
                if position < len(data):
                    client.send(data[position:position + 1])
            if stop.wait(0.05):  # the attack's pace: one byte per connection every 50 ms
                return

    attack = threading.Thread(target=loris, daemon=True)
    attack.start()
    try:
        while attack.is_alive():
            guard.round_trip("during a slow-loris transfer")
        attack.join()
        for i, client in enumerate(attackers):
            read_until(client, lambda c=client: outcomes_of(c.frames).get(0) is not None,
                       ROUND_TRIP_BOUND, f"the outcome of the trickled transfer {i}")
            assert outcomes_of(client.frames)[0] == "accepted"
            guard.expect(f"hostile.trickle.{i}", [f"trickled-{i}"], send=False)
    finally:
        stop.set()
        for client in attackers:
            client.close()
    guard.verify()


# -- names, composites, selectors ------------------------------------------------------------------


@pytest.mark.parametrize("role", ["sender", "receiver"])
@pytest.mark.parametrize("length", [1025, 1_000_000])
def test_huge_names_are_refused_with_a_condition(guarded, role, length):
    broker, guard = guarded()
    name = "n" * length
    with RawClient(broker.address) as attacker:
        attacker.handshake("namer", max_frame=4 << 20)
        attacker.begin()
        if role == "sender":
            attacker.send(performative("attach", [f"big-{role}", uint(0), False, ubyte(0), ubyte(0),
                                                  source("x"), described(0x29, [name]), None, None,
                                                  uint(0)]))
        else:
            attacker.send(performative("attach", [f"big-{role}", uint(0), True, ubyte(0), ubyte(0),
                                                  source(name), described(0x29, [])]))
        guard.round_trip("while a huge name is checked")
        refused(attacker, f"big-{role}", f"a {length}-byte {role} address")
        guard.round_trip("after a huge name")
        # A name at the limit is still fine on the same connection.
        attacker.attach_sender(1, "m" * 1024)
        attacker.expect("flow", lambda f: f.link == "snd-1")
        assert detach_of(attacker, "snd-1") is None
    guard.verify()


def test_wildcard_subscription_against_a_long_name_does_not_stall(guarded):
    broker, guard = guarded()
    with RawClient(broker.address) as attacker:
        attacker.handshake("wildcards", max_frame=4 << 20)
        attacker.begin()
        attacker.attach_receiver(0, "hostile.#.#.#", src=source(
            "hostile.#.#.#", capabilities=symbol("topic")))
        name = "hostile." + ".".join("a" for _ in range(500))  # 1,007 bytes: within the limit
        attacker.attach_sender(1, name)
        attacker.expect("flow", lambda f: f.link == "snd-1")
        attacker.send(transfer(1, 0, message_bytes("deep", durable=True)))
        guard.round_trip("while a wildcard matches a long name")
        read_until(attacker, lambda: outcomes_of(attacker.frames).get(0) is not None, ROUND_TRIP_BOUND,
                   "the outcome of a send to a long name")
        assert outcomes_of(attacker.frames)[0] == "accepted"
    guard.verify()


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_composites_with_10000_parts_are_refused(guarded, role):
    broker, guard = guarded()
    composite = ",".join(f"hostile.part.{i}" for i in range(10_000))
    with RawClient(broker.address) as attacker:
        attacker.handshake("composer", max_frame=4 << 20)
        attacker.begin()
        if role == "sender":
            attacker.send(performative("attach", ["composite", uint(0), False, ubyte(0), ubyte(0),
                                                  source("x"), described(0x29, [composite]), None, None,
                                                  uint(0)]))
        else:
            attacker.send(performative("attach", ["composite", uint(0), True, ubyte(0), ubyte(0),
                                                  source(composite), described(0x29, [])]))
        guard.round_trip("while a 10,000-part composite is checked")
        refused(attacker, "composite", f"a 10,000-part composite {role}")
        # A composite at the limit (256 parts) is accepted.
        at_limit = ",".join(f"hostile.ok.{i}" for i in range(256))
        attacker.attach_sender(1, at_limit)
        attacker.expect("flow", lambda f: f.link == "snd-1")
    guard.verify()


@pytest.mark.parametrize("length", [16 * 1024 + 1, 1_000_000])
def test_huge_selectors_are_refused(guarded, length):
    broker, guard = guarded()
    clause = "color = 'red' OR "
    text = (clause * (length // len(clause) + 1))[:length - 11] + "color = 'x'"
    text = text[:length]
    assert len(text.encode()) == length
    selector = {symbol("jms-selector"): Described(SELECTOR_FILTER, text)}
    with RawClient(broker.address) as attacker:
        attacker.handshake("selector", max_frame=4 << 20)
        attacker.begin()
        attacker.send(performative("attach", ["sel", uint(0), True, ubyte(0), ubyte(0),
                                              source("hostile.selected", filter=selector),
                                              described(0x29, [])]))
        guard.round_trip("while a huge selector is checked")
        refused(attacker, "sel", f"a {length}-byte selector")
    guard.verify()


# -- decode bombs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_decode_bombs_in_messages(guarded, bomb):
    broker, guard = guarded()
    payload = BOMBS[bomb]
    with RawClient(broker.address, timeout=30) as attacker:
        attacker.handshake("bomber", max_frame=4 << 20)
        attacker.begin()
        # A selector consumer makes the broker look at properties on dispatch too.
        attacker.send(performative("attach", ["sel", uint(5), True, ubyte(0), ubyte(0),
                                              source("hostile.bomb", filter={symbol("jms-selector"): Described(
                                                  SELECTOR_FILTER, "k IS NOT NULL OR deep IS NOT NULL")}),
                                              described(0x29, [])]))
        attacker.send(performative("flow", flow_fields(5, 10)))
        attacker.attach_sender(0, "hostile.bomb")
        attacker.expect("flow", lambda f: f.link == "snd-0")
        attacker.send(transfer(0, 0, payload))
        guard.round_trip(f"while the {bomb} is handled")
        read_until(attacker, lambda: 0 in outcomes_of(attacker.frames) or detach_of(attacker, "snd-0")
                   or any(f.name == "close" for f in attacker.frames), 30, f"an answer to the {bomb}")
        outcome = outcomes_of(attacker.frames).get(0)
        if outcome == "rejected":
            state = next(f.field(4) for f in attacker.frames if f.name == "disposition" and f.field(0))
            condition = state.value[0] if state.value else None
            assert condition is not None and str(condition.value[0]) == "amqp:decode-error", state
        elif outcome == "accepted":
            # Accepted: it passes through as sent, to a consumer without a selector.
            attacker.send(performative("detach", [uint(5), True]))
            got = raw_receive(broker.address, "hostile.bomb", 1)
            assert got == [payload], f"the accepted {bomb} came back changed"
        else:
            ended = detach_of(attacker, "snd-0") or next(f for f in attacker.frames if f.name == "close")
            assert ended.error in DECODE_REFUSALS, \
                f"{bomb}: {ended.name} {ended.error}"
    guard.verify()


def _attach_with_properties(raw_properties: bytes) -> bytes:
    """An attach (receiver on hostile.pbomb) whose last field, properties, is `raw_properties`."""
    head = [encode("pbomb"), encode(uint(0)), encode(True), encode(ubyte(0)), encode(ubyte(0)),
            encode(source("hostile.pbomb")), encode(described(0x29, [])), b"\x40", b"\x40", b"\x40",
            b"\x40", b"\x40", b"\x40", raw_properties]
    body = b"".join(head)
    return frame(b"\x00\x53\x12\xd0" + struct.pack(">II", len(body) + 4, len(head)) + body)


@pytest.mark.parametrize("bomb", ["array-of-4-billion", "nesting-100k"])
def test_decode_bombs_in_performatives(guarded, bomb):
    broker, guard = guarded()
    raw = map8_with("p", ARRAY_BOMB if bomb == "array-of-4-billion" else nested_lists(100_000))
    with RawClient(broker.address, timeout=30) as attacker:
        attacker.handshake("pbomber", max_frame=4 << 20)
        attacker.begin()
        attacker.send(_attach_with_properties(raw) + PROBE)
        guard.round_trip(f"while an attach with {bomb} is handled")
        seen = attacker.answer(ROUND_TRIP_BOUND)
        # Carried on (the properties are the client's business), or refused with a condition.
        assert seen == "carried on" or seen.split(" ", 1)[1] in DECODE_REFUSALS, f"{bomb}: {seen}"
    guard.verify()



def test_link_properties_nested_100k_deep_refuse_the_attach_with_decode_error(guarded):
    """Proton decodes the nesting (C, bounded by the frame); converting it to Python objects
    would recurse 100k deep: the attach is refused with amqp:decode-error, not internal-error."""
    broker, guard = guarded()
    with RawClient(broker.address, timeout=30) as attacker:
        attacker.handshake("pnester", max_frame=4 << 20)
        attacker.begin()
        attacker.send(_attach_with_properties(nested_lists(100_000)))
        detach = attacker.expect("detach", lambda f: f.link == "pbomb")
        assert detach.error == "amqp:decode-error", (detach.error, detach.description)
        guard.round_trip("after the refused attach")
    guard.verify()

# -- poison properties --------------------------------------------------------------------------


def poison_message(body: str) -> bytes:
    header = encode(described(0x70, ["yes", [1], "ttl"]))  # durable, priority, ttl: wrong types
    properties = encode(described(0x73, [
        f"id-{body}", None, None, None, None, None, None, None,
        "tomorrow",       # absolute-expiry-time: a string
        math.nan,         # creation-time: a double NaN
        [1, 2],           # group-id: a list
    ]))
    app = encode(Described(ulong(0x74), {"color": "blue"}))
    return header + properties + app + encode(Described(ulong(0x77), body))


def test_poison_properties_pass_through_as_sent_and_lose_nothing(guarded):
    broker, guard = guarded()
    plain = {name: message_bytes(name, {"color": color}, durable=True)
             for name, color in [("red-1", "red"), ("red-2", "red"), ("blue-1", "blue")]}
    poison = poison_message("poison")
    with RawClient(broker.address) as client:
        client.handshake("poisoner")
        client.begin()
        # A selector consumer first: each dispatch pass skips the red messages.
        client.send(performative("attach", ["blue", uint(5), True, ubyte(0), ubyte(0),
                                            source("hostile.poison", filter={symbol("jms-selector"): Described(
                                                SELECTOR_FILTER, "color = 'blue'")}), described(0x29, [])]))
        client.expect("attach", lambda f: f.link == "blue")
        client.send(performative("flow", flow_fields(5, 10)))
        client.attach_sender(0, "hostile.poison")
        client.expect("flow", lambda f: f.link == "snd-0")
        sends = [plain["red-1"], plain["red-2"], poison, plain["blue-1"]]
        client.send(b"".join(transfer(0, i, m) for i, m in enumerate(sends)))
        read_until(client, lambda: len(outcomes_of(client.frames)) >= 4, ROUND_TRIP_BOUND,
                   "the outcomes of the four sends")
        refusals = [f.field(4) for f in client.frames if f.name == "disposition"
                    and OUTCOMES.get(int(f.field(4).descriptor)) != "accepted"]
        assert outcomes_of(client.frames) == {i: "accepted" for i in range(4)}, refusals
        read_until(client, lambda: sum(f.name == "transfer" for f in client.frames) >= 2,
                   ROUND_TRIP_BOUND, "the poison and blue-1 for the selector consumer")
        delivered = [f.payload for f in client.frames if f.name == "transfer"]
        assert delivered == [poison, plain["blue-1"]], "the poison message did not pass through as sent"
        for f in client.frames:
            if f.name == "transfer":
                client.send(disposition(int(f.field(1))))
        guard.round_trip("after the poison")
        client.send(performative("detach", [uint(5), True]))
        client.expect("detach", lambda f: f.link == "blue")
    # The messages the dispatch pass skipped are all still there.
    guard.expect("hostile.poison", ["red-1", "red-2"], send=False)
    guard.verify()


def test_poison_properties_do_not_stop_expiry(guarded):
    broker, guard = guarded("[server]\nexpiry_scan_ms = 100\n")
    with RawClient(broker.address) as client:
        client.handshake("poison-expiry")
        client.begin()
        client.attach_sender(0, "hostile.poison.a")
        client.expect("flow", lambda f: f.link == "snd-0")
        client.send(transfer(0, 0, poison_message("poison")))
        read_until(client, lambda: 0 in outcomes_of(client.frames), ROUND_TRIP_BOUND, "the poison's outcome")
        assert outcomes_of(client.frames)[0] == "accepted"
    # A message with a short time to live, on a queue scanned after the poisoned one, expires.
    conn = connect(broker.url)
    conn.create_sender("hostile.poison.b").send(Message(body="short-lived", ttl=0.2, durable=True))
    conn.close()
    wait_for(lambda: queue_depth(broker, "hostile.poison.b") == 0, timeout=5,
             message="the short-lived messages to expire")
    guard.verify()


def queue_depth(broker, queue: str) -> int:
    rows = management_call(broker.url, "queue.stat", timeout=ROUND_TRIP_BOUND)
    return next((r["messages"] for r in rows if r["queue"] == queue), 0)


# -- a greedy consumer -------------------------------------------------------------------------------


def test_a_consumer_with_max_credit_that_never_settles_does_not_block_producers(guarded):
    broker, guard = guarded("""
[server]
max_memory_mb = 64

[[address_settings]]
match = "hostile.backlog"
max_size_bytes = 1048576
address_full_policy = "page"
""")
    backlog = [f"b-{i:05d}-" + "y" * 2000 for i in range(2000)]  # ~4 MB behind a 1 MB limit
    guard.expect("hostile.backlog", backlog)
    greedy = RawClient(broker.address)
    received = []
    stop = threading.Event()

    def read() -> None:  # it reads everything, settles nothing
        while not stop.is_set():
            try:
                f = greedy.read_frame(0.2)
            except TimeoutError:
                continue
            except (Closed, OSError):
                return
            if f.name == "transfer":
                received.append(f)

    try:
        greedy.handshake("greedy")
        greedy.begin()
        greedy.attach_receiver(0, "hostile.backlog", credit=0xFFFFFFFF)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        guard.round_trip("with a greedy consumer")
        # Producers to the same address still get credit and their messages are accepted.
        more = [f"more-{i}" for i in range(200)]
        start = time.monotonic()
        guard.expect("hostile.backlog", more)
        assert time.monotonic() - start < 2 * ROUND_TRIP_BOUND
        guard.round_trip("after producing behind a greedy consumer")
    finally:
        stop.set()
        greedy.close()
    # The greedy consumer settled nothing: everything comes back.
    guard.verify()


# -- max_connections ----------------------------------------------------------------------------------


def test_connections_over_max_connections_are_closed_with_resource_limit_exceeded(guarded):
    broker, guard = guarded("[server]\nmax_connections = 5\n")
    clients = [RawClient(broker.address) for _ in range(10)]
    try:
        outcome = []
        for i, client in enumerate(clients):
            try:
                client.handshake(f"crowd-{i}")
                client.send(performative("begin", [None, uint(0), uint(100), uint(100)]))
                f = client.read_frame(ROUND_TRIP_BOUND)
                outcome.append(f.error if f.name == "close" else f.name)
            except (AssertionError, Closed) as refusal:
                closes = [f for f in client.frames if f.name == "close"]
                outcome.append(closes[0].error if closes else f"dropped: {refusal}")
        # The guard holds one connection: four more are served, the other six refused.
        assert outcome == ["begin"] * 4 + ["amqp:resource-limit-exceeded"] * 6, outcome
        guard.round_trip("with the connection limit reached")
        # The served ones close cleanly (the broker has let them go once it answers the close).
        for client in clients[:4]:
            client.send(performative("close", []))
            client.expect("close")
    finally:
        for client in clients:
            client.close()
    guard.verify()  # a fresh connection is served again
