"""A bridge retries a refusal that can pass (issue 28, finding 11; the contract's "High
availability and bridges"): a remote Hermod whose target address is full under
`address_full_policy = "fail"` answers `rejected` with `amqp:resource-limit-exceeded`; once it
is drained everything arrives and nothing is dead-lettered. Another rejection still goes to the
local dead-letter address, with the remote's condition on the copy."""
from __future__ import annotations

from proton import Message
from proton.utils import BlockingConnection, SendException

from bridge_testing import REMOTE_CONFIG, bridge_row, bridged_queue_config, numbered, queue_row, read_all, send_all
from hermod_testing import wait_for

DLA = ('[[address_settings]]\nmatch = "#"\ndead_letter_address = "DLQ"\n'
       '[[address]]\nname = "DLQ"\n  [[address.queue]]\n  name = "DLQ"\n')
SMALL_AND_FAILING = ('[[address_settings]]\nmatch = "inbound"\nmax_size_bytes = 4000\n'
                     'address_full_policy = "fail"\n')
FULL = "amqp:resource-limit-exceeded"


def fill(url: str, address: str) -> int:
    """Send 1 KiB messages until the address refuses one: how many it took."""
    connection = BlockingConnection(url, timeout=10)
    try:
        sender = connection.create_sender(address)
        for taken in range(100):
            try:
                sender.send(Message(body="x" * 1024, properties={"filler": True}))
            except SendException:
                return taken
        raise AssertionError("the address never filled up")
    finally:
        connection.close()


def test_a_remote_full_for_a_while_gets_every_message_once_drained_and_none_is_dead_lettered(
        run_broker, tmp_path):
    remote = run_broker("remote", REMOTE_CONFIG + SMALL_AND_FAILING)
    fillers = fill(remote.url, "inbound")
    assert fillers >= 1
    local = run_broker("local", bridged_queue_config(remote.url, extra=DLA))
    assert send_all(local.url, "outbound", numbered(5)) == 5
    # the remote refused them as full, more than once: the bridge is backing off
    wait_for(lambda: sum(FULL in line for line in local.stderr_lines) >= 2, timeout=20,
             message="the bridge retried after resource-limit-exceeded")
    assert queue_row(local.url, "DLQ")["messages"] == 0
    assert queue_row(local.url, "outbound")["messages"] == 5
    got = read_all(remote.url, "inbound", fillers + 5, timeout=30, idle=1.0)
    numbers = [m.properties["n"] for m in got if "n" in (m.properties or {})]
    assert numbers == [0, 1, 2, 3, 4]
    assert len(got) == fillers + 5
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="outbound drained")
    assert queue_row(local.url, "DLQ")["messages"] == 0
    assert bridge_row(local.url)["forwarded"] == 5


def test_another_rejection_is_dead_lettered_with_the_remote_condition(run_broker, tmp_path):
    # The remote validates user-id: a message claiming another user is rejected there, with
    # amqp:unauthorized-access, which no retry changes.
    remote = run_broker("remote", REMOTE_CONFIG + "[security]\nvalidate_user_id = true\n")
    local = run_broker("local", bridged_queue_config(remote.url, extra=DLA))
    messages = numbered(3)
    messages[1].user_id = b"mallory"
    assert send_all(local.url, "outbound", messages) == 3
    assert [m.properties["n"] for m in read_all(remote.url, "inbound", 2, idle=0.5)] == [0, 2]
    dead = read_all(local.url, "DLQ", 1, idle=0.5)
    assert [m.properties["n"] for m in dead] == [1]
    assert dead[0].annotations["x-opt-bridge-condition"] == "amqp:unauthorized-access"
    assert "user-id" in dead[0].annotations["x-opt-bridge-description"]
    assert dead[0].annotations["x-opt-ORIG-QUEUE"] == "outbound"
    assert any("amqp:unauthorized-access" in line for line in local.stderr_lines)
    assert bridge_row(local.url)["forwarded"] == 2
