"""References without foreign keys: the store keeps their integrity itself.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

`message_refs` loses its two foreign keys (-> messages, -> queues, both ON DELETE CASCADE). Their
triggers cost PostgreSQL's server about half of its CPU under Q1D (a key-share row lock on the
message and on the queue per inserted reference, a cascade scan per deleted message); the store
now deletes references and unreferenced messages itself and sweeps leftovers at recovery
(store.apply, store.integrity; the figures are in store.models).

SQLite cannot drop a constraint in place: batch mode recreates the table, which must stay
WITHOUT ROWID. Downgrading first removes what the foreign keys would refuse (references to a
missing queue or message), then adds them back.

Written by hand and checked against `store.models` by the drift test on both dialects.
"""
from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TO_MESSAGES = "fk_message_refs_message_id_messages"
_TO_QUEUES = "fk_message_refs_queue_id_queues"
_TABLE_OPTIONS = {"sqlite_with_rowid": False}


def upgrade() -> None:
    with op.batch_alter_table("message_refs", table_kwargs=_TABLE_OPTIONS) as batch:
        batch.drop_constraint(_TO_MESSAGES, type_="foreignkey")
        batch.drop_constraint(_TO_QUEUES, type_="foreignkey")


def downgrade() -> None:
    op.execute("DELETE FROM message_refs WHERE NOT EXISTS"
               " (SELECT 1 FROM queues WHERE queues.id = message_refs.queue_id)"
               " OR NOT EXISTS (SELECT 1 FROM messages WHERE messages.id = message_refs.message_id)")
    with op.batch_alter_table("message_refs", table_kwargs=_TABLE_OPTIONS) as batch:
        batch.create_foreign_key(_TO_MESSAGES, "messages", ["message_id"], ["id"],
                                 ondelete="CASCADE")
        batch.create_foreign_key(_TO_QUEUES, "queues", ["queue_id"], ["id"], ondelete="CASCADE")
