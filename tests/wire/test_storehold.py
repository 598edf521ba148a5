"""StoreHold's bookkeeping (protocol/storehold.py) on its own: commits that complete out of
order, output tagged with the acknowledgements read before it, released in order and whole.
The behaviour through a broker is in tests/durable (test_ack_durability.py and
test_durable_faults.py::test_connection_keeps_reading_while_its_acknowledgement_is_being_stored)."""
from __future__ import annotations

from hermod.broker.protocol.storehold import StoreHold


def test_output_waits_for_every_acknowledgement_read_before_it_and_no_other():
    hold, written = StoreHold(), []
    assert hold.write(b"before", written.append)  # nothing pending: straight out
    first, second = hold.begin(), hold.begin()
    assert not hold.write(b"after-2", written.append)
    third = hold.begin()
    assert not hold.write(b"after-3", written.append)
    assert hold.held_bytes == len(b"after-2") + len(b"after-3")

    assert not hold.end(second)  # out of order: the watermark stays below the first
    assert not hold.release(written.append)
    assert hold.end(first)  # the gap closes: 1 and 2 stored
    assert hold.stored == 2
    assert hold.release(written.append)
    assert written == [b"before", b"after-2"]
    assert not hold.write(b"after-3 too", written.append)  # behind the held chunk, in order

    assert hold.end(third)
    hold.release(written.append)
    assert written == [b"before", b"after-2", b"after-3", b"after-3 too"]
    assert hold.held_bytes == 0 and not hold.holding
    assert hold.write(b"later", written.append)


def test_held_output_over_the_budget_is_reported_once_each_way():
    hold = StoreHold()
    epoch = hold.begin()
    hold.write(b"x" * 10, lambda data: None)
    assert not hold.crossed(10)
    hold.write(b"y", lambda data: None)
    assert hold.crossed(10) and hold.over_budget
    assert not hold.crossed(10)
    hold.end(epoch)
    hold.release(lambda data: None)
    assert hold.crossed(10) and not hold.over_budget
