"""Alembic environment for the Hermod store.

Configured from code (`store.schema.alembic_config`), no alembic.ini: the caller hands over an
open connection in `config.attributes["connection"]`; without one the URL in the main option
`sqlalchemy.url` is used. The target metadata is `store.models.metadata`. SQLite gets batch mode
(it cannot ALTER most things in place, so batch operations recreate the table).
"""
from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from hermod.store.models import metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    dialect = url.split(":", 1)[0].split("+", 1)[0] if url else "sqlite"
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=dialect == "sqlite",
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    from hermod.store.engine import make_engine

    engine = make_engine(context.config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
