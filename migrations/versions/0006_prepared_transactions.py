"""Prepared XA transaction branches.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

One row per prepared branch (`store.models.PreparedTransactionRow`): its held sends and its
acknowledgements, until the branch is committed or rolled back.

Written by hand and checked against `store.models` by the drift test on both dialects.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prepared_transactions",
        sa.Column("xid", sa.LargeBinary(), nullable=False),
        sa.Column("highest_message_id", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("xid", name=op.f("pk_prepared_transactions")),
    )


def downgrade() -> None:
    op.drop_table("prepared_transactions")
