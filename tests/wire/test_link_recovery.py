"""Link recovery (AMQP 1.0 §2.6.13 resuming deliveries, §2.7.3 the attach's unsettled map),
spoken frame by frame: no Proton client sends an unsettled map. A link whose terminus is
durable (`unsettled-state`) re-attached under the same container id and link name after its
connection was lost:

- a sender learns from the broker's attach which of its unsettled transfers the broker has
  (state accepted), and one of them sent again is not enqueued twice;
- a receiver gets the broker's unsettled map, a delivery it reports accepted is not delivered
  again, and the ones it had not settled are.
"""
from __future__ import annotations

import struct

from proton import Described, uint, ulong

from amqp_frames import ATTACH, DISPOSITION, FLOW, SOURCE, TARGET, TRANSFER, FrameClient, message
from hermod_testing import wait_for
from wire_helpers import connect, receive_bodies, send

UNSETTLED_STATE = uint(2)
ACCEPTED = Described(ulong(0x24), [])


def queue_stat(broker, name: str) -> dict:
    from hermod.broker.tools.clients import management_call
    return next(r for r in management_call(broker.url, "queue.stat") if r["queue"] == name)


def session(broker, container: str, max_frame_size: int | None = None) -> tuple[FrameClient, int]:
    """A raw connection with one session; the broker's next-outgoing-id."""
    client = FrameClient(broker.address)
    client.handshake(container=container, max_frame_size=max_frame_size)
    begin = client.begin(0)
    return client, int(begin.fields[1])


def attach_sender(client: FrameClient, name: str, address: str, unsettled=None):
    target = Described(ulong(TARGET), [address, UNSETTLED_STATE])
    source = Described(ulong(SOURCE), [None])
    client.send(0, ATTACH, [name, uint(0), False, None, None, source, target, unsettled])
    reply = client.expect(ATTACH)
    while client.read().code != FLOW:  # the broker's credit
        pass
    return reply


def attach_receiver(client: FrameClient, name: str, address: str, unsettled=None):
    source = Described(ulong(SOURCE), [address, UNSETTLED_STATE])
    target = Described(ulong(TARGET), [None])
    client.send(0, ATTACH, [name, uint(0), True, None, None, source, target, unsettled])
    return client.expect(ATTACH)


def transfer(client: FrameClient, delivery_id: int, tag: bytes, body: bytes, resume: bool = False) -> None:
    client.send(0, TRANSFER, [uint(0), uint(delivery_id), tag, uint(0), False, False, None, None, resume],
                message(body))


def outcomes(client: FrameClient, count: int) -> dict[int, str]:
    """delivery id -> outcome descriptor of the next `count` settled deliveries."""
    got: dict[int, str] = {}
    while len(got) < count:
        f = client.expect(DISPOSITION)
        first, last = int(f.fields[1]), int(f.fields[2] if f.fields[2] is not None else f.fields[1])
        for i in range(first, last + 1):
            got[i] = hex(int(f.fields[4].descriptor)) if f.fields[4] is not None else None
    return got


def give_credit(client: FrameClient, next_incoming: int, credit: int, delivery_count: int = 0) -> None:
    client.send(0, FLOW, [uint(next_incoming), uint(2 ** 31 - 1), uint(0), uint(2 ** 31 - 1), uint(0),
                          uint(delivery_count), uint(credit)])


def read_transfers(client: FrameClient, count: int, frames: list | None = None) -> list[tuple[bytes, bytes]]:
    """(tag, payload) of the next `count` transfers (their frames appended to `frames`)."""
    out = []
    while len(out) < count:
        f = client.expect(TRANSFER)
        out.append((bytes(f.fields[2]), f.payload))
        if frames is not None:
            frames.append(f)
    return out


def resumed(frame) -> bool:
    return len(frame.fields) > 8 and frame.fields[8] is True


def test_a_recovering_sender_learns_what_the_broker_has_and_nothing_is_enqueued_twice(broker):
    first, _ = session(broker, "rec-sender")
    attach_sender(first, "orders-link", "rec.orders")
    transfer(first, 0, b"tag-1", b"one")
    transfer(first, 1, b"tag-2", b"two")
    assert outcomes(first, 2) == {0: "0x24", 1: "0x24"}
    first.close()  # the connection is lost before the client saw the outcomes (as far as it knows)
    wait_for(lambda: queue_stat(broker, "rec.orders")["messages"] == 2, message="two stored")

    again, _ = session(broker, "rec-sender")
    reply = attach_sender(again, "orders-link", "rec.orders",
                          unsettled={b"tag-1": None, b"tag-2": None, b"tag-3": None})
    assert reply.fields[7] == {b"tag-1": ACCEPTED, b"tag-2": ACCEPTED}  # tag-3 never arrived
    transfer(again, 0, b"tag-1", b"one", resume=True)  # the client sends it again all the same
    transfer(again, 1, b"tag-3", b"three")
    assert outcomes(again, 2) == {0: "0x24", 1: "0x24"}
    again.close()
    wait_for(lambda: queue_stat(broker, "rec.orders")["added"] == 3, message="three added")
    assert queue_stat(broker, "rec.orders")["messages"] == 3

    conn = connect(broker.url)
    receiver = conn.create_receiver("rec.orders")
    assert receive_bodies(receiver, 3) == [b"one", b"two", b"three"]
    conn.close()


def test_a_sender_attaching_without_an_unsettled_map_is_not_deduplicated(broker):
    first, _ = session(broker, "rec-fresh")
    attach_sender(first, "link", "rec.fresh")
    transfer(first, 0, b"tag-1", b"first")
    assert outcomes(first, 1) == {0: "0x24"}
    first.close()
    fresh, _ = session(broker, "rec-fresh")
    reply = attach_sender(fresh, "link", "rec.fresh")  # a new link of the same name: tags start over
    assert len(reply.fields) <= 7 or reply.fields[7] is None
    transfer(fresh, 0, b"tag-1", b"second")
    assert outcomes(fresh, 1) == {0: "0x24"}
    fresh.close()
    wait_for(lambda: queue_stat(broker, "rec.fresh")["messages"] == 2, message="both enqueued")


def test_a_recovering_receiver_resumes_exactly_what_it_had_not_settled(broker):
    conn = connect(broker.url)
    send(conn, "rec.inbox", ["m1", "m2", "m3"])
    conn.close()

    first, next_id = session(broker, "rec-receiver")
    attach_receiver(first, "inbox-link", "rec.inbox")
    give_credit(first, next_id, 3)
    sent = read_transfers(first, 3)
    tags = [tag for tag, _ in sent]
    assert len(set(tags)) == 3
    first.close()  # lost with all three unsettled; the client had processed m1 (accepted it)
    wait_for(lambda: queue_stat(broker, "rec.inbox")["consumers"] == 0, message="link gone")

    again, next_id = session(broker, "rec-receiver")
    reply = attach_receiver(again, "inbox-link", "rec.inbox", unsettled={tags[0]: ACCEPTED, tags[1]: None})
    assert set(reply.fields[7]) == set(tags)  # the broker's map: every delivery it had not seen settled
    give_credit(again, next_id, 10)
    frames: list = []
    resent = read_transfers(again, 2, frames)
    assert [resumed(f) for f in frames] == [True, False]  # m2 it named unsettled: resumed; m3 it did not name
    bodies = [payload for _, payload in resent]
    assert [b"m2" in p for p in bodies] == [True, False] and b"m3" in bodies[1]
    assert [tag for tag, _ in resent] == tags[1:]  # the same deliveries, under their tags
    wait_for(lambda: queue_stat(broker, "rec.inbox")["acked"] == 1, message="m1 acknowledged")
    again.close()
    assert queue_stat(broker, "rec.inbox")["messages"] == 2  # m2 and m3, m1 is gone


def test_a_non_durable_receiver_link_is_not_recovered(broker):
    conn = connect(broker.url)
    send(conn, "rec.plain", ["p1"])
    conn.close()
    first, next_id = session(broker, "rec-plain")
    source = Described(ulong(SOURCE), ["rec.plain"])
    first.send(0, ATTACH, ["plain", uint(0), True, None, None, source, Described(ulong(TARGET), [None])])
    first.expect(ATTACH)
    give_credit(first, next_id, 1)
    [(tag, _)] = read_transfers(first, 1)
    first.close()
    wait_for(lambda: queue_stat(broker, "rec.plain")["consumers"] == 0, message="link gone")
    again, next_id = session(broker, "rec-plain")
    reply = attach_receiver(again, "plain", "rec.plain", unsettled={tag: ACCEPTED})
    assert reply.fields[7] == {}  # nothing remembered of a link whose source kept no state
    give_credit(again, next_id, 1)
    [(_, payload)] = read_transfers(again, 1)
    assert b"p1" in payload  # delivered again: the accepted state it claimed names nothing
    again.close()


def test_frames_around_a_recovering_attach_pass_unchanged(broker):
    """The rewritten attach is followed by ordinary traffic on the same connection."""
    client, next_id = session(broker, "rec-traffic")
    reply = attach_sender(client, "t", "rec.traffic", unsettled={})
    assert reply.fields[7] == {}
    for i in range(50):
        transfer(client, i, struct.pack(">I", i), b"x" * 3000)
    assert len(outcomes(client, 50)) == 50
    client.close()
    wait_for(lambda: queue_stat(broker, "rec.traffic")["messages"] == 50, message="fifty stored")


def test_an_unsettled_map_too_big_for_the_peers_frames_is_cut_and_marked_incomplete(broker):
    conn = connect(broker.url)
    send(conn, "rec.many", [f"m{i}" for i in range(100)])
    conn.close()
    first, next_id = session(broker, "rec-many")
    attach_receiver(first, "many", "rec.many")
    give_credit(first, next_id, 100)
    tags = [tag for tag, _ in read_transfers(first, 100)]
    first.close()
    wait_for(lambda: queue_stat(broker, "rec.many")["consumers"] == 0, message="link gone")
    again, _ = session(broker, "rec-many", max_frame_size=512)
    again.send(0, ATTACH, ["many", uint(0), True, None, None, Described(ulong(SOURCE), ["rec.many", UNSETTLED_STATE]),
                           Described(ulong(TARGET), [None]), {tags[0]: None}])
    reply = again.expect(ATTACH)
    assert reply.fields[8] is True  # incomplete-unsettled
    assert 0 < len(reply.fields[7]) < 100 and set(reply.fields[7]) <= set(tags)
    again.close()


def test_a_durable_subscription_link_is_recovered_across_a_broker_restart(start_broker, tmp_path):
    """Nothing of the link is remembered through a restart, but its subscription queue and
    messages are stored, and the broker's delivery tags name the messages: what the receiver
    reports accepted is not delivered again."""
    store = f"sqlite:///{tmp_path / 'recovery.db'}"
    b = start_broker(store=store)
    first, next_id = session(b, "rec-durable")
    attach_receiver(first, "ticker", "topic://rec.durable")  # the durable subscription rec-durable.ticker
    conn = connect(b.url)
    send(conn, "topic://rec.durable", ["t1", "t2", "t3"], durable=True)
    conn.close()
    give_credit(first, next_id, 3)
    tags = [tag for tag, _ in read_transfers(first, 3)]
    first.close()
    wait_for(lambda: queue_stat(b, "rec-durable.ticker")["consumers"] == 0, message="link gone")
    assert b.stop() == 0

    b = start_broker(store=store)
    again, next_id = session(b, "rec-durable")
    reply = attach_receiver(again, "ticker", "topic://rec.durable",
                            unsettled={tags[0]: ACCEPTED, tags[1]: None})
    assert set(reply.fields[7]) == {tags[0], tags[1]}  # the two it names that the broker still has
    give_credit(again, next_id, 10)
    frames: list = []
    resent = [payload for _, payload in read_transfers(again, 2, frames)]
    assert b"t2" in resent[0] and b"t3" in resent[1]
    assert [resumed(f) for f in frames] == [True, False]
    wait_for(lambda: queue_stat(b, "rec-durable.ticker")["acked"] == 1, message="t1 acknowledged")
    again.close()
