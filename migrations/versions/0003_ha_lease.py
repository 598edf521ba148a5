"""The shared-store lease and the backups waiting for it ([ha] mode = "shared-store").

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Written by hand and checked against `store.models` by the drift test on both dialects.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ha_lease",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("announce", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ha_lease")),
    )
    op.create_table(
        "ha_backups",
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("announce", sa.String(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node", name=op.f("pk_ha_backups")),
    )


def downgrade() -> None:
    op.drop_table("ha_backups")
    op.drop_table("ha_lease")
