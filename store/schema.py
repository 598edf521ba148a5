"""Schema management: Alembic configured from code, upgrade, and the start-up check.

`upgrade(url)` applies every revision in `migrations/versions/` (running it again is harmless).
`check(url)` raises a `SchemaError` with one line unless the database is exactly at the newest
revision this code knows and its tables match `store.models`.

Developers add a revision with `python -m store.schema revision -m "what changed"`: it migrates a
scratch SQLite database to head and autogenerates the difference against the models, which is
then reviewed by hand and run on both dialects by the tests.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
from pathlib import Path
from typing import Iterator

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from hermod import migrations

from .engine import display_url, make_engine
from .errors import (
    SchemaCorrupt,
    SchemaOutdated,
    SchemaTooNew,
    StoreError,
    StoreUnreachable,
    one_line,
)
from .models import metadata

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
VERSION_TABLE = "alembic_version"
# Serialises concurrent upgrades of one PostgreSQL database (two brokers starting at once).
_PG_UPGRADE_LOCK = 0x6865726D6F64  # "hermod"


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic Config for `migrations/`, without any alembic.ini."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        rendered = url if isinstance(url, str) else url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    return heads[0] if len(heads) == 1 else ",".join(sorted(heads))


def known_revisions() -> set[str]:
    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def upgrade(url: str | Engine, *, sqlite_synchronous: str = "FULL") -> None:
    """Apply every revision up to head. Harmless when the schema is already there."""
    with _engine(url, sqlite_synchronous) as engine, translate_errors(engine.url):
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                   {"key": _PG_UPGRADE_LOCK})
            heads = _current_heads(connection)
            _refuse_unknown(heads, engine.url)
            if not heads:
                _refuse_unversioned_tables(connection, engine.url)
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        if heads != (head_revision(),):
            log.info("store %s upgraded to schema revision %s", display_url(engine.url),
                     head_revision())


def check(url: str | Engine) -> None:
    """Raise SchemaError (one line) unless the schema is at head and matches the models."""
    with _engine(url, "FULL") as engine, translate_errors(engine.url):
        with engine.connect() as connection:
            where = display_url(engine.url)
            heads = _current_heads(connection)
            _refuse_unknown(heads, engine.url)
            if not heads:
                _refuse_unversioned_tables(connection, engine.url)
                raise SchemaOutdated(f"store {where} has no schema: run 'hermod db upgrade'")
            if heads != (head_revision(),):
                raise SchemaOutdated(f"store {where} is at schema revision {','.join(heads)}, "
                                     f"expected {head_revision()}: run 'hermod db upgrade'")
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            differences = compare_metadata(context, metadata)
            if differences:
                raise SchemaCorrupt(f"store {where} does not match schema revision "
                                    f"{head_revision()}: {describe_differences(differences)}")


def current_revision(url: str | Engine) -> str | None:
    with _engine(url, "FULL") as engine, translate_errors(engine.url):
        with engine.connect() as connection:
            heads = _current_heads(connection)
    return ",".join(heads) if heads else None


def describe_differences(differences: list) -> str:
    """A short text for autogenerate's difference list ("remove_table messages; ...")."""
    parts = []
    for difference in differences:
        item = difference[0] if isinstance(difference, list) else difference
        kind = item[0]
        subject = next((getattr(x, "name", None) for x in item[1:] if getattr(x, "name", None)),
                       None)
        if subject is None:
            subject = ".".join(str(x) for x in item[2:4] if isinstance(x, str))
        parts.append(f"{kind} {subject}".strip())
    shown = "; ".join(parts[:5])
    return shown + (f" (and {len(parts) - 5} more)" if len(parts) > 5 else "")


# ---------------------------------------------------------------------------------------------


def _current_heads(connection: Connection) -> tuple[str, ...]:
    context = MigrationContext.configure(connection)
    return tuple(sorted(context.get_current_heads()))


def _refuse_unknown(heads: tuple[str, ...], url: URL) -> None:
    unknown = [head for head in heads if head not in known_revisions()]
    if unknown:
        raise SchemaTooNew(
            f"store {display_url(url)} is at schema revision {','.join(unknown)}, newer than "
            f"this Hermod knows (newest {head_revision()}): use a newer Hermod")


def _refuse_unversioned_tables(connection: Connection, url: URL) -> None:
    ours = set(metadata.tables)
    present = ours & set(inspect(connection).get_table_names())
    if present:
        raise SchemaCorrupt(f"store {display_url(url)} has tables {', '.join(sorted(present))} "
                            f"but no {VERSION_TABLE} revision")


@contextlib.contextmanager
def _engine(url: str | Engine, sqlite_synchronous: str) -> Iterator[Engine]:
    if isinstance(url, Engine):
        yield url
        return
    engine = make_engine(url, sqlite_synchronous=sqlite_synchronous)
    try:
        yield engine
    finally:
        engine.dispose()


@contextlib.contextmanager
def translate_errors(url: URL) -> Iterator[None]:
    """Turn driver errors at start-up into one-line StoreErrors."""
    try:
        yield
    except StoreError:
        raise
    except DBAPIError as error:
        raise classify(error, url) from error
    except SQLAlchemyError as error:
        raise StoreError(f"store {display_url(url)}: {one_line(error)}") from error
    except OSError as error:
        raise StoreUnreachable(f"store {display_url(url)}: {one_line(error)}") from error
    except Exception as error:  # alembic's CommandError and friends
        if type(error).__module__.startswith("alembic"):
            raise SchemaCorrupt(f"store {display_url(url)}: {one_line(error)}") from error
        raise


def classify(error: DBAPIError, url: URL) -> StoreError:
    where = display_url(url)
    cause = one_line(error.orig) if error.orig is not None else one_line(error)
    if url.get_backend_name() == "sqlite":
        lowered = cause.lower()
        if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            return SchemaCorrupt(f"store {where} is not a valid SQLite database: {cause}")
        if "unable to open" in lowered:
            return StoreUnreachable(f"store {where} cannot be opened: {cause}")
        return StoreError(f"store {where}: {cause}")
    if error.connection_invalidated or _is_connection_error(error):
        return StoreUnreachable(f"store {where} is unreachable: {cause}")
    return StoreError(f"store {where}: {cause}")


def _is_connection_error(error: DBAPIError) -> bool:
    from sqlalchemy.exc import InterfaceError, OperationalError

    return isinstance(error, (OperationalError, InterfaceError))


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m store.schema")
    sub = parser.add_subparsers(dest="command", required=True)
    revision = sub.add_parser("revision", help="autogenerate a new revision for review")
    revision.add_argument("-m", "--message", required=True)
    revision.add_argument("--url", default="sqlite:///build/schema-scratch.db",
                          help="scratch database migrated to head first")
    args = parser.parse_args(argv)
    upgrade(args.url)
    config = alembic_config(args.url)
    number = max(int(r) for r in known_revisions() if r.isdigit()) + 1
    command.revision(config, message=args.message, autogenerate=True, rev_id=f"{number:04d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
