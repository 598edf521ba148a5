"""Transactions under the broker's limits, on the wire: held sends count against
max_size_bytes from the moment they arrive, and a transaction left open past the transaction
timeout is rolled back by the broker (`amqp:transaction:timeout` for a late discharge)."""
from __future__ import annotations

from proton import Delivery

from test_transactions import TIMEOUT, TRANSACTIONAL_STATE, TxClient, stats, take_in_transaction
from wire_helpers import connect, nothing_more

FULL_ON_FAIL = """
[[address_settings]]
match = "held.#"
max_size_bytes = 2000
address_full_policy = "fail"
"""


def test_held_sends_fill_the_address_and_a_rollback_empties_it(start_broker):
    b = start_broker(config=FULL_ON_FAIL)
    client = TxClient(b.url)
    sender = client.sender("held.orders")
    txn = client.declare()
    outcomes = []
    for _ in range(20):
        state, _, condition = client.send(sender, b"x" * 500, txn).result(TIMEOUT)
        outcomes.append(condition)
        if state == Delivery.REJECTED:
            break
    # Nothing is on the queue yet, but the held sends filled the address.
    assert outcomes[-1] == "amqp:resource-limit-exceeded"
    assert 2 <= len(outcomes) <= 6
    assert stats(b.url, "held.orders")["messages"] == 0
    assert client.abort(txn) == ("aborted", None)
    # The rollback gave the room back: a plain send is taken again.
    state, _, condition = client.send(sender, b"y" * 500).result(TIMEOUT)
    assert (state, condition) == (Delivery.ACCEPTED, None)
    client.close()


def test_committed_held_sends_are_counted_once(start_broker):
    b = start_broker(config=FULL_ON_FAIL)
    client = TxClient(b.url)
    sender = client.sender("held.once")
    txn = client.declare()
    for _ in range(2):
        state, _, _ = client.send(sender, b"x" * 500, txn).result(TIMEOUT)
        assert state == TRANSACTIONAL_STATE
    assert client.commit(txn) == ("committed", None)
    assert stats(b.url, "held.once")["messages"] == 2
    # ~1 KB counted after commit, not ~2 KB: two more fit before the limit.
    state, _, condition = client.send(sender, b"z" * 400).result(TIMEOUT)
    assert (state, condition) == (Delivery.ACCEPTED, None)
    client.close()


def test_an_open_transaction_times_out_and_is_rolled_back(start_broker):
    b = start_broker(config="[server]\ntransaction_timeout_s = 1.5\n")
    plain = connect(b.url)
    out = plain.create_receiver("tx.slow.out", credit=5)
    client = TxClient(b.url)
    txn = take_in_transaction(client, plain, "tx.slow", settle_before_discharge=True)
    sender = client.sender("tx.slow.out")
    client.send(sender, "held", txn).result(TIMEOUT)
    # The broker rolls it back: the accepted message returns to its queue, counted, and goes
    # to the next consumer with credit.
    again = plain.create_receiver("tx.slow", credit=1).receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("a", 1)
    assert client.commit(txn) == ("failed", "amqp:transaction:timeout")
    state, _, condition = client.send(sender, "late", txn).result(TIMEOUT)
    assert (state, condition) == (Delivery.REJECTED, "amqp:transaction:timeout")
    assert nothing_more(out)  # the held send was dropped
    assert stats(b.url, "tx.slow.out")["added"] == 0
    client.close()
    plain.close()


def test_the_transaction_timeout_environment_override_wins_over_the_file(start_broker):
    b = start_broker(config="[server]\ntransaction_timeout_s = 300\n",
                     env={"HERMOD_TRANSACTION_TIMEOUT_S": "1.5"})
    plain = connect(b.url)
    client = TxClient(b.url)
    take_in_transaction(client, plain, "tx.env", settle_before_discharge=True)
    # Rolled back by the broker after 1.5 s, not 300: the message goes to the next consumer.
    again = plain.create_receiver("tx.env", credit=1).receive(timeout=TIMEOUT)
    assert (again.body, again.delivery_count) == ("a", 1)
    client.close()
    plain.close()
