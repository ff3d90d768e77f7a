"""The lamina command line. Every command mirrors a library call and can print JSON.

The root group lives here and attaches the command groups, one module each; they share only
``_common`` (state, options, JSON) and ``output`` (tables, progress bars)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from lamina.cli._common import State, fail, path_option
from lamina.cli.context import context
from lamina.cli.db import db
from lamina.cli.demo import demo
from lamina.cli.governance import governance
from lamina.cli.hierarchy import hierarchy
from lamina.cli.knowledge import knowledge
from lamina.cli.memory import memory
from lamina.cli.server import keys, mcp, serve
from lamina.cli.sessions import session
from lamina.cli.system import health, info
from lamina.errors import ErrorCode, LaminaError

__all__ = ["cli", "main"]


@click.group()
@path_option(
    "--data-dir",
    "data_dir",
    directory=True,
    help="Data directory (default: LAMINA_DATA_DIR, else data_dir in the config file, else "
    "the user data directory; `lamina info` shows which).",
)
@click.option(
    "--database-url",
    default=None,
    help="sqlite:///path/to/file.db or postgresql://user@host:port/db (default: the SQLite "
    "file in the data directory).",
)
@path_option(
    "--config",
    "config_file",
    directory=False,
    help="A TOML settings file (default: LAMINA_CONFIG, else lamina.toml in the user config "
    "directory when it exists).",
)
@click.option("--tenant", "tenant_id", default=None, help="Tenant (default: 'default').")
@click.version_option(package_name="lamina")
@click.pass_context
def cli(
    ctx: click.Context,
    data_dir: Path | None,
    database_url: str | None,
    config_file: Path | None,
    tenant_id: str | None,
) -> None:
    """lamina: layered long-term memory for AI agents."""
    state = State(
        {
            "data_dir": data_dir,
            "database_url": database_url,
            "config_file": config_file,
            "tenant_id": tenant_id,
        }
    )
    ctx.obj = state
    ctx.call_on_close(state.close)


for command in (
    memory,
    hierarchy,
    context,
    session,
    knowledge,
    governance,
    db,
    info,
    health,
    demo,
    serve,
    mcp,
    keys,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: errors print their code and message, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    logging.basicConfig(
        level=os.environ.get("LAMINA_LOG_LEVEL", "WARNING").upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        cli.main(args=args, prog_name="lamina", standalone_mode=False)
    except LaminaError as exc:
        fail(exc, as_json)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: no traceback for users
        if os.environ.get("LAMINA_DEBUG"):
            raise
        logging.getLogger("lamina").error("unexpected failure", exc_info=exc)
        fail(LaminaError(ErrorCode.INTERNAL_ERROR, f"unexpected failure: {exc}"), as_json)
