"""Several live brokers on one PostgreSQL: node leases, queue owners, shared id blocks
(store.ownership; docs/scale-out.md).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Written by hand and checked against `store.models` by the drift test on both dialects.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_nodes",
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("announce", sa.String(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("holder", name=op.f("pk_cluster_nodes")),
    )
    op.create_table(
        "queue_owners",
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("queue", name=op.f("pk_queue_owners")),
    )
    op.create_index(op.f("ix_queue_owners_holder"), "queue_owners", ["holder"])
    blocks = op.create_table(
        "id_blocks",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("next_value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_id_blocks")),
    )
    # The message id counter exists from the start, so that allocations never race to create
    # it; store.ownership.allocate_ids never hands out an id below those already stored.
    op.bulk_insert(blocks, [{"name": "message", "next_value": 1}])


def downgrade() -> None:
    op.drop_table("id_blocks")
    op.drop_index(op.f("ix_queue_owners_holder"), table_name="queue_owners")
    op.drop_table("queue_owners")
    op.drop_table("cluster_nodes")
