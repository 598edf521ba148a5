"""Topic names and filters: validation, `$share/GROUP/FILTER`, the mapping to Hermod addresses
and back (contract "Names": `/` -> `.`, `+` -> `*`, `#` -> `#`), and the `$` rule."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermod.broker.core.wildcards import matches
from hermod.broker.mqtt import MqttError
from hermod.broker.mqtt.topics import (SharedSubscription, address_to_topic, dollar_excluded, filter_to_pattern,
                                       parse_shared, topic_matches, topic_to_address, validate_topic_filter,
                                       validate_topic_name)


@pytest.mark.parametrize("name", ["a", "a/b", "/", "a//b", "/lead", "$SYS/x", "spBv1.0/g/NDATA/n", "é"])
def test_valid_topic_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", "a/+", "a/#", "a+b", "x\x00"])
def test_invalid_topic_names_are_0x90(name):
    with pytest.raises(MqttError) as info:
        validate_topic_name(name)
    assert info.value.reason_code == 0x90


@pytest.mark.parametrize("f", ["#", "+", "a/#", "a/+/b", "+/+", "/+", "a//#", "$share/g/a/+", "$share/g/#"])
def test_valid_filters(f):
    validate_topic_filter(f)


@pytest.mark.parametrize("f", ["", "a/#/b", "a#", "a/b#", "a+/b", "a/+b", "##", "$share/g", "$share//a",
                               "$share/g+/a", "$share/g/", "$share/g/a/#/b"])
def test_invalid_filters_are_0x8f(f):
    with pytest.raises(MqttError) as info:
        validate_topic_filter(f)
    assert info.value.reason_code == 0x8F


def test_shared_subscriptions_parse():
    assert parse_shared("$share/grp/sport/+") == SharedSubscription("grp", "sport/+")
    assert parse_shared("sport/+") is None and parse_shared("$SYS/x") is None


@pytest.mark.parametrize("topic,address", [("plant/line1/temp", "plant.line1.temp"), ("a//b", "a..b"),
                                           ("spBv1.0/g", "spBv1%2E0.g"), ("a/*/b", "a.%2A.b"),
                                           ("a/>", "a.%3E"), ("a*b/c>", "a*b.c>"), ("urn:x/a::b", "urn:x.a:%3Ab"),
                                           ("100%/x", "100%.x"), ("%2E", "%252E"), ("$SYS/x", "$SYS.x")])
def test_topic_to_address_and_back(topic, address):
    assert topic_to_address(topic) == address
    assert address_to_topic(address) == topic


def test_filters_map_to_patterns_the_core_matches():
    assert filter_to_pattern("sport/tennis/+") == "sport.tennis.*"
    assert filter_to_pattern("sport/#") == "sport.#"
    assert filter_to_pattern("#") == "#"
    assert filter_to_pattern("a.b/+") == "a%2Eb.*"
    pairs = [("sport/tennis/+", "sport/tennis/p1"), ("sport/#", "sport"), ("sport/#", "sport/a/b"),
             ("+/+", "/x"), ("a.b/+", "a.b/c"), ("a/*", "a/*"), ("a/+", "a/b/c"), ("a/b", "a.b")]
    for f, t in pairs:
        assert matches(filter_to_pattern(f), topic_to_address(t)) == topic_matches(f, t), (f, t)


def test_reply_to_addresses_become_response_topics():
    assert address_to_topic("replies.d1") == "replies/d1"
    assert address_to_topic("odd+name") == "odd%2Bname"
    with pytest.raises(MqttError):
        address_to_topic("a.*")


def test_wildcard_first_filters_never_match_dollar_topics():
    assert not topic_matches("#", "$SYS/x") and not topic_matches("+/x", "$SYS/x")
    assert topic_matches("$SYS/#", "$SYS/x") and topic_matches("#", "SYS/x")
    assert dollar_excluded(filter_to_pattern("#"), topic_to_address("$SYS/x"))
    assert dollar_excluded(filter_to_pattern("+/x"), topic_to_address("$SYS/x"))
    assert not dollar_excluded(filter_to_pattern("$SYS/#"), topic_to_address("$SYS/x"))
    assert not dollar_excluded(filter_to_pattern("#"), topic_to_address("SYS/x"))


levels = st.text(st.characters(blacklist_characters="/+#\x00", blacklist_categories=("Cs",)), max_size=6)


@given(st.lists(levels, min_size=1, max_size=5))
def test_the_mapping_is_reversible_for_every_topic_name(parts):
    topic = "/".join(parts)
    assert address_to_topic(topic_to_address(topic)) == topic
    words = topic_to_address(topic).split(".")
    assert len(words) == len(parts) and "*" not in words and ">" not in words and "#" not in words
    assert "::" not in topic_to_address(topic)
