"""`hermod` command line: parse, call one function, print one clear line and exit 2 on error.

The commands live in modules by concern: cli_run.py (`run`: composing, serving and stopping the
broker), cli_admin.py (config, store, users, systemd, data pipeline, docs), cli_clients.py
(producer, consumer, queue stat, perf), cli_manage.py and cli_inspect.py (management over
`hermod.management`), cli_definitions.py (definitions export/import). This module puts them
together into the one parser the man page and completion are generated from (cli_docs.py).
"""
from __future__ import annotations

import argparse
import os
import sys

from . import config as config_mod
from .cli_errors import EXIT_USAGE, CliError, fail

__all__ = ["main", "build_parser", "version", "CliError", "EXIT_USAGE"]


def version() -> str:
    """The installed distribution's version (package metadata), else the source tree's."""
    from importlib import metadata
    try:
        return metadata.version("hermod-broker")
    except metadata.PackageNotFoundError:
        from . import __version__
        return __version__


def build_parser() -> argparse.ArgumentParser:
    from . import cli_admin, cli_clients, cli_manage
    p = argparse.ArgumentParser(prog="hermod", description="Hermod AMQP 1.0 message broker")
    p.add_argument("--version", action="version", version=f"hermod {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    # The entry point's one environment default: the log level of `run`.
    cli_admin.add_run_parsers(sub, log_level=os.environ.get("HERMOD_LOG_LEVEL", "info"))
    queue = cli_clients.add_parsers(sub)
    cli_manage.add_parsers(sub, queue)
    cli_admin.add_data_parsers(sub)
    cli_clients.add_perf_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CliError, config_mod.ConfigError) as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return 130
    except ConnectionError as e:
        from .tools.clients import Refused
        return fail(str(e) if isinstance(e, Refused) else f"connection failed: {e}")
    except Exception as e:  # noqa: BLE001 - a client command's refusal is one line; anything else is a bug
        from .tools.clients import refusal_line
        line = refusal_line(e)
        if line is None:
            raise
        return fail(line)


if __name__ == "__main__":
    sys.exit(main())
