"""The store's tables as typed SQLAlchemy 2.x models. No logic lives here.

A message is stored once (`messages`), whatever the number of queues it is on; each queue that
holds it has one row in `message_refs` with its own delivery count. The primary key of
`message_refs` is (queue_id, message_id), so a queue's references come back in message id order
(the order the broker assigned) straight from the index, which is what recovery and paging read.

Changing anything here needs a new revision in `migrations/versions/`; a test compares these
models with the migrated schema on SQLite and PostgreSQL and fails on any difference.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Constraint names are part of the schema: batch migrations on SQLite recreate tables and can
# only drop or alter a constraint that has a stable name.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# Broker-assigned 64-bit ids. On SQLite an INTEGER PRIMARY KEY is the rowid itself (no second
# index); BIGINT would not be, so the SQLite variant is INTEGER (also 64-bit there).
MessageId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = metadata


class AddressRow(Base):
    __tablename__ = "addresses"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    anycast: Mapped[bool] = mapped_column(Boolean)
    multicast: Mapped[bool] = mapped_column(Boolean)
    auto_created: Mapped[bool] = mapped_column(Boolean)


class QueueRow(Base):
    """Every attribute of `ports.QueueRecord`. The integer id keeps reference rows small."""

    __tablename__ = "queues"
    __table_args__ = (
        CheckConstraint("routing_type IN ('anycast', 'multicast')", name="routing_type"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String, unique=True)
    # No foreign key to addresses: the core owns the order in which it records addresses and
    # queues, and recovery hands both back as they are.
    address: Mapped[str] = mapped_column(String, index=True)
    routing_type: Mapped[str] = mapped_column(String(16))
    filter: Mapped[str | None] = mapped_column(Text)
    max_consumers: Mapped[int] = mapped_column(Integer)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    last_value_key: Mapped[str | None] = mapped_column(String)
    auto_created: Mapped[bool] = mapped_column(Boolean)
    purpose: Mapped[str] = mapped_column(String(32))
    extra: Mapped[dict[str, Any]] = mapped_column(JSON)


class MessageRow(Base):
    """A durable message: its encoded AMQP sections plus the fields recovery needs."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(MessageId, primary_key=True, autoincrement=False)
    address: Mapped[str] = mapped_column(String)
    routing_type: Mapped[str | None] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(SmallInteger)
    expiration: Mapped[int] = mapped_column(BigInteger)  # epoch ms, 0 = never
    scheduled_time: Mapped[int] = mapped_column(BigInteger)  # epoch ms, 0 = now
    arrival: Mapped[int] = mapped_column(BigInteger)  # epoch ms
    encoded: Mapped[bytes] = mapped_column(LargeBinary)


class MessageRefRow(Base):
    """One message on one queue.

    No foreign keys (revision 0005): the store keeps the references' integrity itself, as
    Artemis's journal does. A reference is written in the unit that writes its message (and
    only to a queue the Applier found by name); a message goes with its last reference at the
    end of the unit that removed it; deleting a queue deletes its references and then the
    messages no longer referenced (store.apply); recovery sweeps anything left over
    (store.integrity). The two foreign-key triggers cost PostgreSQL's server 2.27 s of CPU per
    100k Q1D messages, 1.28 s without them (a row lock on the parent per inserted reference,
    a cascade scan per deleted message).
    """

    __tablename__ = "message_refs"
    __table_args__ = (
        # "Is this message still referenced?" after an acknowledgement.
        Index("ix_message_refs_message_id", "message_id"),
        # The composite primary key is the only index needed for paging: no rowid on SQLite.
        {"sqlite_with_rowid": False},
    )

    queue_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # queues.id
    message_id: Mapped[int] = mapped_column(MessageId, primary_key=True)  # messages.id
    delivery_count: Mapped[int] = mapped_column(Integer)


class RetainedMessageRow(Base):
    """A copy of an accepted message kept for `retention_days` whatever consumers do (analysis,
    replay); `id` increases in arrival order."""

    __tablename__ = "retained_messages"
    __table_args__ = (
        Index("ix_retained_messages_address_arrival", "address", "arrival"),
        Index("ix_retained_messages_arrival", "arrival"),
    )

    id: Mapped[int] = mapped_column(MessageId, primary_key=True, autoincrement=True)
    message_id: Mapped[int] = mapped_column(BigInteger, index=True)  # the broker's id
    address: Mapped[str] = mapped_column(String)
    routing_type: Mapped[str | None] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(SmallInteger)
    arrival: Mapped[int] = mapped_column(BigInteger)  # epoch ms the broker accepted it
    encoded: Mapped[bytes] = mapped_column(LargeBinary)


class AcknowledgementRow(Base):
    """When a consumer acknowledged a retained message (end-to-end latency)."""

    __tablename__ = "acknowledgements"

    id: Mapped[int] = mapped_column(MessageId, primary_key=True, autoincrement=True)
    message_id: Mapped[int] = mapped_column(BigInteger, index=True)
    queue: Mapped[str] = mapped_column(String)
    at: Mapped[int] = mapped_column(BigInteger)


class DeadLetterRow(Base):
    """A message moved to a dead-letter address, and why."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(MessageId, primary_key=True, autoincrement=True)
    message_id: Mapped[int] = mapped_column(BigInteger)
    original_address: Mapped[str] = mapped_column(String, index=True)
    queue: Mapped[str] = mapped_column(String)
    reason: Mapped[str] = mapped_column(String(64))
    at: Mapped[int] = mapped_column(BigInteger)


class DuplicateIdRow(Base):
    """`_AMQ_DUPL_ID`s seen per address; only the newest N per address are kept."""

    __tablename__ = "duplicate_ids"

    address: Mapped[str] = mapped_column(String, primary_key=True)
    duplicate_id: Mapped[str] = mapped_column(String, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, index=True)


class PreparedTransactionRow(Base):
    """A prepared XA branch (`ports.PreparedRecord`, encoded by store.prepared): kept until its
    commit or rollback, whatever restarts come between. `highest_message_id` keeps recovery's
    next message id above the ids of the messages it holds."""

    __tablename__ = "prepared_transactions"

    xid: Mapped[bytes] = mapped_column(LargeBinary, primary_key=True)
    highest_message_id: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)


class HaLeaseRow(Base):
    """The one row of `[ha] mode = "shared-store"`: who is live, until when on the database's
    clock, and how clients reach it (store.lease)."""

    __tablename__ = "ha_lease"

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    holder: Mapped[str | None] = mapped_column(String)  # one broker process: node and a token
    node: Mapped[str | None] = mapped_column(String)
    epoch: Mapped[int] = mapped_column(BigInteger)  # one more at every takeover
    expires_at: Mapped[Any] = mapped_column(DateTime(timezone=True))
    announce: Mapped[str | None] = mapped_column(String)  # amqp://host:port


class HaBackupRow(Base):
    """A backup waiting for the lease, and how clients reach it once it is live."""

    __tablename__ = "ha_backups"

    node: Mapped[str] = mapped_column(String, primary_key=True)
    announce: Mapped[str] = mapped_column(String)
    seen_at: Mapped[Any] = mapped_column(DateTime(timezone=True))


class ClusterNodeRow(Base):
    """A broker process of a several-live-brokers store and until when it is alive, on the
    database's clock (store.ownership; docs/scale-out.md)."""

    __tablename__ = "cluster_nodes"

    holder: Mapped[str] = mapped_column(String, primary_key=True)  # node and a process token
    node: Mapped[str] = mapped_column(String)
    announce: Mapped[str | None] = mapped_column(String)
    expires_at: Mapped[Any] = mapped_column(DateTime(timezone=True))


class QueueOwnerRow(Base):
    """Which broker process owns a queue; valid only while its `cluster_nodes` row runs."""

    __tablename__ = "queue_owners"

    queue: Mapped[str] = mapped_column(String, primary_key=True)
    holder: Mapped[str | None] = mapped_column(String, index=True)
    epoch: Mapped[int] = mapped_column(BigInteger)  # one more at every change of owner


class IdBlockRow(Base):
    """The next free id of a counter shared by several brokers (message ids, in blocks)."""

    __tablename__ = "id_blocks"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    next_value: Mapped[int] = mapped_column(BigInteger)


def _table(row: type[Base]) -> Table:
    """A model's Table (SQLAlchemy types `__table__` as any FromClause; ours are all tables)."""
    table = row.__table__
    assert isinstance(table, Table)
    return table


addresses = _table(AddressRow)
ha_lease = _table(HaLeaseRow)
ha_backups = _table(HaBackupRow)
cluster_nodes = _table(ClusterNodeRow)
queue_owners = _table(QueueOwnerRow)
id_blocks = _table(IdBlockRow)
retained_messages = _table(RetainedMessageRow)
acknowledgements = _table(AcknowledgementRow)
dead_letters = _table(DeadLetterRow)
duplicate_ids = _table(DuplicateIdRow)
prepared_transactions = _table(PreparedTransactionRow)
queues = _table(QueueRow)
messages = _table(MessageRow)
message_refs = _table(MessageRefRow)
