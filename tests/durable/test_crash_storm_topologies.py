"""The crash storm over several brokers, quick version (issue 28, item 7): two cluster nodes on
one PostgreSQL (the owner and the entry node killed in turns) and a bridged pair (the local and
the remote broker killed in turns), KILLS SIGKILLs each. Nothing accepted is lost and, in
cluster mode, nothing acknowledged comes back. A bridge forwards at least once: its resends
after a kill are duplicates by design and are not counted against it here. The long version
with its table: `make crash-storm` (benchmarks/crash_storm.py --mode cluster bridge)."""
from __future__ import annotations

from crash_storm import Sink, Source, Storm, format_report
from storm_topologies import BRIDGE_SINK, BRIDGE_SOURCE, BridgedBrokers, ClusterBrokers

KILLS = 2


def test_cluster_storm_loses_nothing_accepted_and_redelivers_nothing_acknowledged(pg_store_url, tmp_path):
    brokers = ClusterBrokers(pg_store_url, tmp_path)
    try:
        report = Storm(brokers, 12, batch=10).run(KILLS)
    finally:
        brokers.kill_all()
    summary = format_report(report)
    assert report["kills"] == KILLS and report["acknowledged"] > 0, summary
    assert not report["losses"], f"accepted and lost: {report['losses']} {summary}"
    assert not report["redelivered_after_ack"], summary


def test_bridge_storm_loses_nothing_accepted(sqlite_store_url, tmp_path):
    bridged = BridgedBrokers(sqlite_store_url, f"sqlite:///{tmp_path / 'remote.db'}", tmp_path, "sqlite")
    streams = [Source("bridge", BRIDGE_SOURCE)], [Sink("bridged", BRIDGE_SINK, BRIDGE_SINK, "bridge")]
    try:
        report = Storm(bridged, 12, batch=20, streams=streams).run(KILLS)
    finally:
        bridged.stop()
    summary = format_report(report)
    assert report["kills"] == KILLS and report["acknowledged"] > 0, summary
    assert not report["losses"], f"accepted and lost: {report['losses']} {summary}"
