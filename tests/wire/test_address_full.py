"""max_size_bytes with each address_full_policy, with real clients."""
from __future__ import annotations

import pytest
from proton import Delivery, Message
from proton.utils import SendException

from hermod.broker.tools.clients import management_call
from hermod_testing import wait_for
from wire_helpers import connect, receive_bodies, send_in_background, sync


def policy_config(policy: str, limit: int = 2000) -> str:
    return f"""
[[address_settings]]
match = "full.#"
max_size_bytes = {limit}
address_full_policy = "{policy}"
"""


def queue_messages(url: str, name: str) -> int:
    return next(r["messages"] for r in management_call(url, "queue.stat") if r["queue"] == name)


def test_fail_policy_rejects_with_resource_limit_exceeded(start_broker):
    b = start_broker(config=policy_config("fail"))
    conn = connect(b.url)
    sender = conn.create_sender("full.fail")
    accepted = 0
    with pytest.raises(SendException) as e:
        for i in range(100):
            sender.send(Message(body=b"x" * 500))
            accepted += 1
    assert e.value.state == Delivery.REJECTED
    assert 1 <= accepted <= 6  # up to the limit, then refused
    assert receive_bodies(conn.create_receiver("full.fail"), accepted) == [b"x" * 500] * accepted
    conn.close()


def test_drop_policy_accepts_and_discards(start_broker):
    b = start_broker(config=policy_config("drop"))
    conn = connect(b.url)
    sender = conn.create_sender("full.drop")
    for i in range(20):
        sender.send(Message(body=b"x" * 500))  # every send is accepted
    assert queue_messages(b.url, "full.drop") < 20
    conn.close()


def test_block_policy_withholds_credit_until_there_is_room(start_broker):
    b = start_broker(config=policy_config("block"))
    conn = connect(b.url)
    sender_conn = connect(b.url)
    sender = sender_conn.create_sender("full.block")
    total = 1100  # more than one credit window: the broker must stop granting credit
    t, done, errors = send_in_background(sender, range(total))
    wait_for(lambda: queue_messages(b.url, "full.block") >= 1000, timeout=30)
    assert not done.is_set()  # blocked: out of credit, no rejection
    assert queue_messages(b.url, "full.block") < total
    r = conn.create_receiver("full.block", credit=200)
    got = receive_bodies(r, total, timeout=30)
    assert got == list(range(total))
    assert done.wait(30) and not errors
    t.join()
    sender_conn.close()
    conn.close()


NON_DURABLE_QUEUE = """
[[address]]
name = "full.page"
routing = ["anycast"]
  [[address.queue]]
  name = "full.page"
  routing = "anycast"
  durable = false
"""


@pytest.mark.parametrize("where", ["store", "spool: memory store", "spool: non-durable queue"])
def test_page_policy_keeps_a_window_in_memory_and_delivers_everything(start_broker, tmp_path, where):
    """Durable queues page into the store; queues that store nothing page into the spool's
    temporary files. Either way the producer is never blocked and every message comes back."""
    config = policy_config("page", limit=20_000)
    store = f"sqlite:///{tmp_path / 'page.db'}"
    if where == "spool: memory store":
        store = "memory"
    elif where == "spool: non-durable queue":
        config += NON_DURABLE_QUEUE
    b = start_broker(config=config, store=store)
    conn = connect(b.url)
    sender = conn.create_sender("full.page")
    n = 3000
    for i in range(n):
        sender.send(Message(body=f"{i:06d}" + "x" * 200))
    row = next(r for r in management_call(b.url, "queue.stat") if r["queue"] == "full.page")
    assert row["messages"] == n
    assert row["paged"] > n // 2  # most of it lives in the store or the spool only
    assert row["bytes_in_memory"] <= 20_000 + 2 * 1024  # the window, not the whole queue
    r = conn.create_receiver("full.page", credit=500)
    got = receive_bodies(r, n, timeout=60)
    assert [g[:6] for g in got] == [f"{i:06d}" for i in range(n)]
    sync(conn)  # the last acknowledgements are on their way
    wait_for(lambda: queue_messages(b.url, "full.page") == 0, message="the acknowledgements")
    conn.close()
