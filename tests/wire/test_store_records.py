"""What the broker records in a SQLite store besides queues and messages: dead letters,
duplicate ids (kept across a restart), retained messages and acknowledgement times."""
from __future__ import annotations

from proton import Message
from sqlalchemy import create_engine, select

from hermod.store.models import acknowledgements, dead_letters, retained_messages
from wire_helpers import connect, nothing_more, receive_bodies, sync


def rows(url: str, table) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            return list(c.execute(select(table).order_by(table.c.id)))
    finally:
        engine.dispose()


def test_rejected_durable_message_moves_to_the_dead_letter_queue_and_is_recorded(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'dlq.db'}"
    b = start_broker(store=store)
    conn = connect(b.url)
    conn.create_sender("st.rej").send(Message(body="poison", durable=True))
    r = conn.create_receiver("st.rej")
    r.receive(timeout=10)
    r.reject()
    assert receive_bodies(conn.create_receiver("DLQ"), 1) == ["poison"]
    conn.close()
    recorded = rows(store, dead_letters)
    assert [(d.original_address, d.queue, d.reason) for d in recorded] == [("st.rej", "st.rej", "rejected")]


def test_duplicate_ids_are_remembered_across_a_restart(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'dup.db'}"
    b = start_broker(store=store)
    conn = connect(b.url)
    conn.create_sender("st.dup").send(Message(body="first", durable=True, properties={"_AMQ_DUPL_ID": "x1"}))
    conn.close()
    assert b.stop() == 0
    b2 = start_broker(store=store)
    conn = connect(b2.url)
    sender = conn.create_sender("st.dup")
    sender.send(Message(body="resend", durable=True, properties={"_AMQ_DUPL_ID": "x1"}))  # accepted
    sender.send(Message(body="new", durable=True, properties={"_AMQ_DUPL_ID": "x2"}))
    r = conn.create_receiver("st.dup")
    assert receive_bodies(r, 2) == ["first", "new"]
    assert nothing_more(r)
    conn.close()


def test_retention_keeps_accepted_messages_and_acknowledgement_times(start_broker, tmp_path):
    store = f"sqlite:///{tmp_path / 'ret.db'}"
    b = start_broker(store=store, config="""
[[address_settings]]
match = "kept.#"
retention_days = 7
""")
    conn = connect(b.url)
    sender = conn.create_sender("kept.orders")
    for i in range(3):
        sender.send(Message(body=f"o{i}"))  # non-durable messages are retained too
    conn.create_sender("other").send(Message(body="not kept"))
    r = conn.create_receiver("kept.orders")
    assert receive_bodies(r, 3) == ["o0", "o1", "o2"]
    sync(conn)
    conn.close()
    assert b.stop() == 0
    retained = rows(store, retained_messages)
    assert [(x.address, x.routing_type) for x in retained] == [("kept.orders", "anycast")] * 3
    assert [x.id for x in retained] == sorted(x.id for x in retained)
    acked = rows(store, acknowledgements)
    assert sorted(a.message_id for a in acked) == sorted(x.message_id for x in retained)
    assert all(a.at >= x.arrival for a, x in zip(sorted(acked, key=lambda a: a.message_id),
                                                     sorted(retained, key=lambda x: x.message_id)))
