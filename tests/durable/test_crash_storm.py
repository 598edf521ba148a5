"""The crash storm, quick version: KILLS SIGKILLs of the broker per back-end during mixed durable
traffic (durable queue, durable subscription, transactions, a divert, a virtual topic, dead
letters), checked as tests/durable/crash_storm.py describes. The long version with its figures:
benchmarks/crash_storm.py (`make crash-storm`). `HERMOD_CRASH_SEED` overrides the seed."""
from __future__ import annotations

import os

from crash_storm import Storm, format_report

KILLS = 5
SEED = int(os.environ.get("HERMOD_CRASH_SEED", "12"))


def test_crash_storm_loses_nothing_accepted_and_redelivers_nothing_acknowledged(brokers):
    storm = Storm(brokers, SEED, batch=30)
    report = storm.run(KILLS)
    summary = format_report(report)
    assert report["kills"] == KILLS, summary
    assert report["accepted"] > 0 and report["acknowledged"] > 0, summary
    assert not report["losses"], f"accepted and lost: {report['losses']} {summary}"
    assert not report["redelivered_after_ack"], (
        f"acknowledged and delivered again: {report['redelivered_after_ack']} {summary}")
    assert not report["duplicates_beyond_in_doubt"], (
        f"duplicates beyond what was in doubt: {report['duplicates_beyond_in_doubt']} {summary}")
