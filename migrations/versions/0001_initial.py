"""Initial schema: addresses, queues, messages stored once, one reference per queue.

Revision ID: 0001
Revises:
Create Date: 2025-11-22

Written by hand (not from autogenerate output) and checked against `store.models` by the drift
test on SQLite and PostgreSQL.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# 64-bit ids; INTEGER on SQLite so that the primary key is the rowid.
MESSAGE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "addresses",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("anycast", sa.Boolean(), nullable=False),
        sa.Column("multicast", sa.Boolean(), nullable=False),
        sa.Column("auto_created", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_addresses")),
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("address", sa.String(), nullable=False),
        sa.Column("routing_type", sa.String(length=16), nullable=False),
        sa.Column("filter", sa.Text(), nullable=True),
        sa.Column("max_consumers", sa.Integer(), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.Column("last_value_key", sa.String(), nullable=True),
        sa.Column("auto_created", sa.Boolean(), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.CheckConstraint("routing_type IN ('anycast', 'multicast')",
                           name=op.f("ck_queues_routing_type")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("name", name=op.f("uq_queues_name")),
    )
    op.create_index(op.f("ix_queues_address"), "queues", ["address"], unique=False)
    op.create_table(
        "messages",
        sa.Column("id", MESSAGE_ID, autoincrement=False, nullable=False),
        sa.Column("address", sa.String(), nullable=False),
        sa.Column("routing_type", sa.String(length=16), nullable=True),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("expiration", sa.BigInteger(), nullable=False),
        sa.Column("scheduled_time", sa.BigInteger(), nullable=False),
        sa.Column("arrival", sa.BigInteger(), nullable=False),
        sa.Column("encoded", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    op.create_table(
        "message_refs",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("message_id", MESSAGE_ID, nullable=False),
        sa.Column("delivery_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"],
                                name=op.f("fk_message_refs_message_id_messages"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["queue_id"], ["queues.id"],
                                name=op.f("fk_message_refs_queue_id_queues"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("queue_id", "message_id", name=op.f("pk_message_refs")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_message_refs_message_id", "message_refs", ["message_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_message_refs_message_id", table_name="message_refs")
    op.drop_table("message_refs")
    op.drop_table("messages")
    op.drop_index(op.f("ix_queues_address"), table_name="queues")
    op.drop_table("queues")
    op.drop_table("addresses")
