"""Retention, acknowledgement times, dead-letter records and duplicate ids.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Written by hand and checked against `store.models` by the drift test on both dialects.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "retained_messages",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("address", sa.String(), nullable=False),
        sa.Column("routing_type", sa.String(length=16), nullable=True),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("arrival", sa.BigInteger(), nullable=False),
        sa.Column("encoded", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retained_messages")),
    )
    op.create_index("ix_retained_messages_address_arrival", "retained_messages", ["address", "arrival"])
    op.create_index("ix_retained_messages_arrival", "retained_messages", ["arrival"])
    op.create_index(op.f("ix_retained_messages_message_id"), "retained_messages", ["message_id"])
    op.create_table(
        "acknowledgements",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acknowledgements")),
    )
    op.create_index(op.f("ix_acknowledgements_message_id"), "acknowledgements", ["message_id"])
    op.create_table(
        "dead_letters",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("original_address", sa.String(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letters")),
    )
    op.create_index(op.f("ix_dead_letters_original_address"), "dead_letters", ["original_address"])
    op.create_table(
        "duplicate_ids",
        sa.Column("address", sa.String(), nullable=False),
        sa.Column("duplicate_id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("address", "duplicate_id", name=op.f("pk_duplicate_ids")),
    )
    op.create_index(op.f("ix_duplicate_ids_seq"), "duplicate_ids", ["seq"])


def downgrade() -> None:
    op.drop_table("duplicate_ids")
    op.drop_table("dead_letters")
    op.drop_table("acknowledgements")
    op.drop_table("retained_messages")
