"""The delivery latency histogram: a batch of acknowledgements counts as each one would."""
from hermod.broker.core.latency import LatencyHistogram


def test_a_batch_counts_as_each_acknowledgement_would():
    now = 1_000_000
    arrivals = [now, now - 3, now - 700, now - 4_000, now - 400_000, now + 5]  # the last: clock stepped back
    one_by_one, batch = LatencyHistogram(), LatencyHistogram()
    for arrival in arrivals:
        one_by_one.observe_ms(now - arrival)
    batch.observe_since(now, arrivals)
    assert batch.cumulative() == one_by_one.cumulative()
    assert (batch.count, batch.sum_ms) == (one_by_one.count, one_by_one.sum_ms) == (6, 3 + 700 + 4_000 + 400_000)
