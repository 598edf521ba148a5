"""WireFormatInfo negotiation as Classic does it, against the real client's first frame."""

from __future__ import annotations

import pytest
from test_java_golden import golden

from hermod.broker.openwire import model as m
from hermod.broker.openwire.codec import (CACHE_SIZE, MAX_INACTIVITY_INITIAL_DELAY, OpenWireCodec, negotiate,
                                          wire_format_info)
from hermod.broker.openwire.errors import OpenWireError


def test_the_java_clients_first_frame_negotiates_tight_cached_v12():
    """The bytes Classic's client sends first (its OpenWireFormatFactory defaults)."""
    [(name, client_hello)] = [g for g in golden()[(12, False, False, True)] if g[0] == "wireformat"]
    broker = OpenWireCodec(max_command_size=1 << 20, preferred=wire_format_info(max_frame_size=1 << 20))
    [info] = broker.feed(client_hello)
    assert isinstance(info, m.WireFormatInfo) and info.properties["ProviderName"] == "ActiveMQ"
    n = broker.negotiated
    assert n is not None
    assert (n.version, n.tight, n.cache, n.cache_size, n.stack_trace, n.tcp_no_delay) == (12, True, True, 1024, True, True)
    assert not n.size_prefix_disabled
    assert n.max_frame_size == 1 << 20
    assert (n.max_inactivity_duration, n.max_inactivity_initial_delay) == (30000, 10000)


def test_our_hello_is_what_the_java_client_sends_in_form():
    """Loose, uncached, size-prefixed, magic first: the same layout as Classic's own."""
    hello = OpenWireCodec(max_command_size=1 << 20).hello()
    assert hello[4] == m.WireFormatInfo.TYPE and hello[5:13] == b"ActiveMQ"
    assert int.from_bytes(hello[:4], "big") == len(hello) - 4


@pytest.mark.parametrize(("ours", "theirs", "expected"), [
    (12, 9, 9), (9, 12, 9), (12, 12, 12), (12, 0, 12), (10, -1, 10), (11, 1 << 30, 11)])
def test_the_version_is_the_lower_one_ignoring_nonpositive(ours, theirs, expected):
    n = negotiate(wire_format_info(version=ours), wire_format_info(version=theirs))
    assert n.version == expected


def test_each_feature_needs_both_sides_and_limits_take_the_smaller():
    ours = wire_format_info(tight=True, cache=True, cache_size=1024, max_inactivity_duration=30000,
                            max_inactivity_initial_delay=10000, max_frame_size=1 << 20)
    theirs = wire_format_info(tight=False, cache=True, cache_size=256, stack_trace=False,
                              max_inactivity_duration=5000, max_inactivity_initial_delay=20000,
                              max_frame_size=0)
    n = negotiate(ours, theirs)
    assert (n.tight, n.cache, n.cache_size, n.stack_trace) == (False, True, 256, False)
    assert (n.max_inactivity_duration, n.max_inactivity_initial_delay) == (5000, 10000)
    assert n.max_frame_size == 1 << 20  # 0 on one side: no preference


def test_missing_options_count_as_off_and_zero():
    bare = m.WireFormatInfo(b"ActiveMQ", 12, None)
    n = negotiate(wire_format_info(), bare)
    assert (n.tight, n.cache, n.stack_trace, n.max_inactivity_duration) == (False, False, False, 0)


def test_malformed_options_are_refused():
    theirs = wire_format_info()
    theirs.properties[CACHE_SIZE] = "big"
    with pytest.raises(OpenWireError, match="not a number"):
        negotiate(wire_format_info(), theirs)
    theirs = wire_format_info(cache_size=-5)
    with pytest.raises(OpenWireError, match="negative CacheSize"):
        negotiate(wire_format_info(), theirs)
    theirs = wire_format_info()
    theirs.properties[MAX_INACTIVITY_INITIAL_DELAY] = True
    with pytest.raises(OpenWireError, match="not a number"):
        negotiate(wire_format_info(), theirs)


def test_a_second_wireformatinfo_renegotiates_with_fresh_caches():
    client = OpenWireCodec(max_command_size=1 << 20)
    broker = OpenWireCodec(max_command_size=1 << 20)
    broker.feed(client.hello())
    client.feed(broker.hello())
    session = m.SessionInfo(session_id=m.SessionId("c", 1))
    assert broker.feed(client.encode(session)) == [session]
    # sent in the format in force, as Classic's client would
    assert isinstance(broker.feed(client.encode(wire_format_info(tight=False)))[0], m.WireFormatInfo)
    assert broker.negotiated is not None and not broker.negotiated.tight
    loose = OpenWireCodec(max_command_size=1 << 20, preferred=wire_format_info(tight=False))
    loose.feed(broker.hello())
    assert broker.feed(loose.encode(session)) == [session]
