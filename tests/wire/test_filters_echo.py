"""Consumer filters under every key and descriptor clients use (jms-selector, the Apache
selector filter described by symbol or ulong, or a plain string, the OASIS `amqp:sql-filter`
draft, no-local), and the filter set the broker echoes in its attach: what is in force is
there, an unsupported filter is not."""
from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong
from proton.reactor import Filter
from proton.utils import LinkDetached

from wire_helpers import connect, nothing_more, receive_bodies, topic

APACHE_SELECTOR = symbol("apache.org:selector-filter:string")
APACHE_SELECTOR_CODE = ulong(0x0000468C00000004)
SQL_FILTER = symbol("amqp:sql-filter")
SQL_FILTER_CODE = ulong(0x120)
NO_LOCAL = symbol("apache.org:no-local-filter:list")


def send_colours(conn, address, colours):
    sender = conn.create_sender(address)
    for colour in colours:
        sender.send(Message(body=colour, properties={"colour": colour}))
    sender.close()


def echoed_filters(receiver) -> dict:
    data = receiver.link.remote_source.filter
    data.rewind()
    return data.get_object() if data.next() else {}


SELECTOR_FORMS = {
    "jms-selector, symbol descriptor": {symbol("jms-selector"): Described(APACHE_SELECTOR, "colour = 'red'")},
    "jms-selector, ulong descriptor": {symbol("jms-selector"): Described(APACHE_SELECTOR_CODE, "colour = 'red'")},
    "jms-selector, no descriptor": {symbol("jms-selector"): "colour = 'red'"},
    "apache key, no descriptor": {APACHE_SELECTOR: "colour = 'red'"},
    "sql-filter, symbol descriptor": {symbol("sql-filter"): Described(SQL_FILTER, "colour = 'red'")},
    "sql-filter, ulong descriptor": {symbol("sql-filter"): Described(SQL_FILTER_CODE, "colour = 'red'")},
}


@pytest.mark.parametrize("form", list(SELECTOR_FORMS))
def test_a_selector_in_every_form_filters_and_is_echoed(broker, form):
    filters = SELECTOR_FORMS[form]
    conn = connect(broker.url)
    address = "filt.forms"
    send_colours(conn, address, ["blue", "red", "green", "red"])
    receiver = conn.create_receiver(address, options=[Filter(filters)])
    assert echoed_filters(receiver) == filters
    assert receive_bodies(receiver, 2) == ["red", "red"]
    assert nothing_more(receiver)
    receiver.close()
    rest = conn.create_receiver(address)
    assert receive_bodies(rest, 2) == ["blue", "green"]  # skipped by that consumer only
    conn.close()


def test_an_unsupported_filter_is_left_out_of_the_echo(broker):
    selector = {symbol("jms-selector"): Described(APACHE_SELECTOR, "colour = 'red'")}
    unknown = {symbol("subject"): Described(symbol("apache.org:legacy-amqp-topic-binding:string"), "a.#"),
               symbol("mystery"): Described(ulong(0x1234), "whatever")}
    conn = connect(broker.url)
    receiver = conn.create_receiver("filt.unsupported", options=[Filter({**selector, **unknown})])
    assert echoed_filters(receiver) == selector
    send_colours(conn, "filt.unsupported", ["blue", "red"])
    assert receive_bodies(receiver, 1) == ["red"]
    conn.close()


def test_no_local_is_echoed_with_the_selector_on_a_subscription(broker):
    filters = {symbol("no-local"): Described(NO_LOCAL, []),
               symbol("jms-selector"): Described(APACHE_SELECTOR, "colour = 'red'")}
    mine = connect(broker.url, container_id="filt-me")
    other = connect(broker.url, container_id="filt-other")
    sub = mine.create_receiver("filt.nolocal", name="nl", options=[topic(), Filter(filters)])
    assert echoed_filters(sub) == filters
    send_colours(mine, "topic://filt.nolocal", ["red"])
    send_colours(other, "topic://filt.nolocal", ["blue", "red"])
    assert receive_bodies(sub, 1) == ["red"]
    assert nothing_more(sub)
    mine.close()
    other.close()


@pytest.mark.parametrize("filters", [
    {symbol("jms-selector"): "colour = = 'red'"},
    {symbol("sql-filter"): Described(SQL_FILTER_CODE, "colour = = 'red'")},
], ids=["plain jms-selector", "sql-filter"])
def test_a_bad_selector_is_refused_with_invalid_field(broker, filters):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as refused:
        conn.create_receiver("filt.bad", options=[Filter(filters)])
    assert refused.value.condition == "amqp:invalid-field"
    assert "near" in refused.value.link.remote_condition.description  # the parse error, with its place
    conn.close()


def test_a_selector_that_is_not_a_string_is_refused(broker):
    conn = connect(broker.url)
    with pytest.raises(LinkDetached) as refused:
        conn.create_receiver("filt.notstring", options=[Filter({symbol("jms-selector"): Described(APACHE_SELECTOR, 42)})])
    assert refused.value.condition == "amqp:invalid-field"
    conn.close()
