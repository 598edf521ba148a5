"""The delivery latency histogram: a batch of acknowledgements counts as each one would."""
import random

from hermod.broker.core.latency import LatencyHistogram


def _assert_batch_counts_as_one_by_one(now: int, arrivals: list[int]) -> LatencyHistogram:
    one_by_one, batch = LatencyHistogram(), LatencyHistogram()
    for arrival in arrivals:
        one_by_one.observe_ms(now - arrival)
    batch.observe_since(now, arrivals)
    assert batch.cumulative() == one_by_one.cumulative()
    assert (batch.count, batch.sum_ms) == (one_by_one.count, one_by_one.sum_ms)
    return batch


def test_a_batch_counts_as_each_acknowledgement_would():
    now = 1_000_000
    arrivals = [now, now - 3, now - 700, now - 4_000, now - 400_000, now + 5]  # the last: clock stepped back
    batch = _assert_batch_counts_as_one_by_one(now, arrivals)
    assert (batch.count, batch.sum_ms) == (6, 3 + 700 + 4_000 + 400_000)


def test_a_batch_within_one_bucket_and_one_across_bounds_count_as_one_by_one():
    now = 1_000_000
    for arrivals in ([now - 30, now - 31, now - 40, now - 30], [now - 2, now - 30, now - 2], [now - 7] * 3, []):
        _assert_batch_counts_as_one_by_one(now, arrivals)


def test_a_large_batch_in_any_order_counts_as_one_by_one():
    now = 10_000_000
    rng = random.Random(7)
    for _ in range(50):
        _assert_batch_counts_as_one_by_one(now, [
            now - rng.choice((0, 1, 5, 6, 10, 99, 100, 101, 4_999, 5_000, rng.randrange(400_000)))
            for _ in range(rng.randrange(1, 300))])
